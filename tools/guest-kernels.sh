#!/usr/bin/env bash
# Fetches the Debian kernels the kernel-matrix test boots under QEMU and unpacks
# what the guest needs from each: the kernel image and the few modules the guest
# checks load (veth). Usage: guest-kernels.sh DIR [SERIES...]
# (default: 6.1 6.12 6.1-rt 6.12-rt)
#
# A series is a kernel version, with the suffix -rt for Debian's PREEMPT_RT
# flavour (linux-image-*-rt-amd64), else the cloud flavour (-cloud-amd64).
# For each series the newest image package of its flavour apt knows is resolved now (ABI
# numbers roll with every Debian point release, so none is written down here),
# downloaded with `apt-get download` and unpacked with `dpkg-deb -x`. Result:
#   DIR/SERIES/vmlinuz        the kernel
#   DIR/SERIES/modules/*.ko   the modules, decompressed (busybox insmod reads plain .ko)
#   DIR/SERIES/package        "NAME VERSION" of the package they came from
# Idempotent: a series whose newest package is already unpacked is left alone;
# without apt lists or network, a series already unpacked is kept.
set -euo pipefail

(( $# >= 1 )) || { echo "usage: $0 DIR [SERIES...]" >&2; exit 2; }
dir=$1
shift
series_list=("$@")
((${#series_list[@]})) || series_list=(6.1 6.12 6.1-rt 6.12-rt)

# Paths inside the package's modules tree, without the compression suffix.
MODULES=(kernel/drivers/net/veth.ko)

# Every linux-image-* package name apt knows (one apt-cache call: each costs
# seconds where apt keeps no binary cache), listed once on first use.
known_names=
list_names() {
  [[ -n $known_names ]] || known_names=$(apt-cache pkgnames linux-image- || true)
  if [[ -z $known_names && $(id -u) -eq 0 ]]; then
    apt-get update -qq >&2 || true  # no lists yet: fetch them once
    known_names=$(apt-cache pkgnames linux-image- || true)
  fi
}

# The flavour of SERIES: rt for VERSION-rt, else cloud.
flavour() { [[ $1 == *-rt ]] && echo rt || echo cloud; }

# The newest package named linux-image-VERSION.*-FLAVOUR-amd64, or empty (the
# signed image: it exists for every ABI, the -unsigned one not always; QEMU boots
# either).
newest_package() {
  local version=${1%-rt}
  local re="^linux-image-${version//./\\.}[.-][0-9][^ ]*-$(flavour "$1")-amd64\$"
  grep -E "$re" <<<"$known_names" | sort -V | tail -1 || true
}

# Copies each of MODULES out of the unpacked tree ROOT into OUT, decompressed.
extract_modules() {
  local root=$1 out=$2 m base found
  mkdir -p "$out"
  for m in "${MODULES[@]}"; do
    base=$(basename "$m")
    found=$(find "$root"/lib/modules/*/ -path "*/$m*" | head -1)
    [[ -n $found ]] || { echo "guest-kernels: $m not in the package" >&2; return 1; }
    case $found in
      *.ko) cp "$found" "$out/$base" ;;
      *.ko.xz) xz -dc "$found" >"$out/$base" ;;
      *.ko.zst) zstd -qdc "$found" >"$out/$base" ;;
      *.ko.gz) gzip -dc "$found" >"$out/$base" ;;
      *) echo "guest-kernels: unknown module format $found" >&2; return 1 ;;
    esac
  done
}

# Downloads and unpacks package NAME (its candidate version) into DIR/SERIES.
fetch() {
  local series=$1 name=$2 target="$dir/$1" version
  # Global, not local: the EXIT trap runs after this function has returned.
  work=$(mktemp -d "$dir/.fetch-$series.XXXXXX")
  trap 'rm -rf "${work:-}"' EXIT  # a failed fetch leaves nothing half-unpacked
  echo "guest-kernels: $series: downloading $name"
  # Sandbox user root: the build tree may not be writable by apt's own user.
  (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$name")
  version=$(dpkg-deb -f "$work"/*.deb Version)
  dpkg-deb -x "$work"/*.deb "$work/root"
  mkdir -p "$work/out"
  cp "$(find "$work/root/boot" -name 'vmlinuz-*' | head -1)" "$work/out/vmlinuz"
  extract_modules "$work/root" "$work/out/modules"
  printf '%s %s\n' "$name" "$version" >"$work/out/package"
  rm -rf "$target"
  mv "$work/out" "$target"
  rm -rf "$work"
}

mkdir -p "$dir"
list_names
for series in "${series_list[@]}"; do
  want=$(newest_package "$series")
  have=$(cat "$dir/$series/package" 2>/dev/null || true)
  if [[ -z $want ]]; then
    [[ -n $have ]] || { echo "guest-kernels: no linux-image-${series%-rt}*-$(flavour "$series")-amd64 package in apt's lists" >&2; exit 1; }
    echo "guest-kernels: $series: apt knows no such package now, keeping $have"
    continue
  fi
  [[ ${have%% *} == "$want" && -s $dir/$series/vmlinuz ]] || fetch "$series" "$want"
done
