#!/usr/bin/env bash
# build-deb.sh BUILD OUT: cptrace_VERSION_amd64.deb from an already built tree
# (`make deb` builds first). The package is laid out with `make install
# DESTDIR=... PREFIX=/usr`, so it holds exactly what `make install` does, plus what
# a Debian package owes its users: manual pages made from the CLI's own --help
# (help2man), the docs, the copyright and changelog, the systemd unit of the
# MinRTT responder, and Depends computed from the binaries (dpkg-shlibdeps).
set -euo pipefail
build=$(realpath "$1")
out=$(realpath -m "$2")
src=$(cd "$(dirname "$0")/../.." && pwd)
version=$(head -n1 "$src/VERSION")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root

# Debian's layout: multiarch libraries, the jar in /usr/share/java, the JNI library
# where the JVM's java.library.path looks (LIBDIR/jni).
libdir=/usr/lib/x86_64-linux-gnu
make -s -C "$src" install BUILD="$build" DESTDIR="$root" PREFIX=/usr LIBDIR=$libdir \
  JARDIR=/usr/share/java JNIDIR=$libdir/jni MAKEFLAGS= >/dev/null

# Binaries and libraries without their debug sections, as dh_strip leaves them.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/cptrace"
for so in "$root$libdir"/*.so "$root$libdir"/jni/*.so; do
  strip --strip-unneeded --remove-section=.comment "$so"
done
strip --strip-debug --remove-section=.comment "$root$libdir/libcptrace.a"

# Java policy: the jar carries its version, the plain name is a link to it.
mv "$root/usr/share/java/cptrace.jar" "$root/usr/share/java/cptrace-$version.jar"
ln -s "cptrace-$version.jar" "$root/usr/share/java/cptrace.jar"

bash "$src/tools/deb/man-pages.sh" "$root/usr/bin/cptrace" "$version" "$root/usr/share/man/man1"

doc=$root/usr/share/doc/cptrace
install -d "$doc"
install -m 644 "$src/tools/deb/copyright" "$doc/copyright"
install -m 644 "$src/README.md" "$doc/README.md"
for f in "$src"/docs/*.md; do install -m 644 "$f" "$doc/$(basename "$f")"; done
sed "s/@VERSION@/$version/; s/@DATE@/$(date -R -d @"$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)")/" \
  "$src/tools/deb/changelog.in" | gzip -9n >"$doc/changelog.gz"

install -D -m 644 "$src/tools/deb/lintian-overrides" "$root/usr/share/lintian/overrides/cptrace"
install -D -m 644 "$src/tools/deb/cptrace-minrttd.service" "$root/usr/lib/systemd/system/cptrace-minrttd.service"

# Depends from the ELF files' NEEDED entries, as dh_shlibdeps does.
mkdir -p "$work/debian"
printf 'Source: cptrace\n\nPackage: cptrace\nArchitecture: amd64\n' >"$work/debian/control"
elfs=("$root/usr/bin/cptrace" "$root$libdir"/*.so "$root$libdir"/jni/*.so)
depends=$(cd "$work" && dpkg-shlibdeps -O -l"$root$libdir" "${elfs[@]}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
size=$(du -k -s --apparent-size "$root" | cut -f1)
install -d "$root/DEBIAN"
sed -e "s/@VERSION@/$version/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
  "$src/tools/deb/control.in" >"$root/DEBIAN/control"
# libcptrace.so lies in a directory ld.so caches.
echo "activate-noawait ldconfig" >"$root/DEBIAN/triggers"
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum >DEBIAN/md5sums)

find "$root" -type d -exec chmod 755 {} +
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "$out"
