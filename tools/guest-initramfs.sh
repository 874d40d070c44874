#!/usr/bin/env bash
# Builds the initramfs of a kernel-matrix guest: busybox, iproute2's ip, the
# built cptrace with libcptrace.so and the test workloads, every shared library
# they load, the kernel's modules, and tests/kernels/guest-init.sh as /init.
# Usage: guest-initramfs.sh BUILD KERNEL_DIR OUT
#   BUILD       the build directory (cptrace, libcptrace.so, tests/*)
#   KERNEL_DIR  one kernel unpacked by tools/guest-kernels.sh (its modules/*.ko)
#   OUT         the cpio archive to write (newc, uncompressed: the guest runs under
#               TCG, where decompressing costs more than copying a larger archive)
set -euo pipefail

(( $# == 3 )) || { echo "usage: $0 BUILD KERNEL_DIR OUT" >&2; exit 2; }
build=$(realpath "$1") kernel_dir=$(realpath "$2") out=$3
src=$(cd "$(dirname "$0")/.." && pwd)
# The programs the guest runs, relative to BUILD; kept in the same layout under
# /opt/cptrace so that the workloads' rpath ($ORIGIN/..) finds libcptrace.so.
PROGRAMS=(cptrace libcptrace.so tests/workload tests/spawner tests/prefork tests/netload tests/clock_truth tests/preempt)

stage=$(mktemp -d "${TMPDIR:-/tmp}/cptrace-initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,usr/sbin,dev,proc,sys,tmp,run,etc,var,modules,opt/cptrace/tests}
ln -s ../run "$stage/var/run"  # ip netns keeps its namespaces in /var/run/netns

# Copies FILE (following symlinks) to the same path inside the stage.
copy_same_path() {
  [[ -e $stage$1 ]] && return 0
  mkdir -p "$stage$(dirname "$1")"
  cp -L "$1" "$stage$1"
}

# Every shared library ELF needs, and the dynamic loader, at the paths the
# loader looks them up (Debian's multiarch directories are built into it).
copy_libs() {
  local lib
  for lib in $(ldd "$1" | awk '/=> \// { print $3 } /^\t\/[^ ]*ld-linux/ { print $1 }'); do
    [[ $lib == "$build"/* ]] || copy_same_path "$lib"  # ours (libcptrace.so): under /opt/cptrace
  done
}

cp /bin/busybox "$stage/bin/busybox"
ln -s busybox "$stage/bin/sh"  # /init's interpreter; it installs the other applets

# iproute2's (veth pairs, namespaces), apart from busybox's applets in /bin.
ip=$(PATH=$PATH:/usr/sbin:/sbin command -v ip)
cp "$ip" "$stage/usr/sbin/ip"
copy_libs "$ip"

for p in "${PROGRAMS[@]}"; do
  [[ -f $build/$p ]] || { echo "guest-initramfs: $build/$p not built (make all)" >&2; exit 1; }
  # Debug info only makes the archive larger; the guest prints no backtraces.
  strip --strip-debug -o "$stage/opt/cptrace/$p" "$build/$p"
  copy_libs "$build/$p"
done

cp "$kernel_dir"/modules/*.ko "$stage/modules/"
install -m 755 "$src/tests/kernels/guest-init.sh" "$stage/init"

mkdir -p "$(dirname "$out")"
(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out.tmp"
mv "$out.tmp" "$out"
