#!/usr/bin/env bash
# Fetches the seccomp profile a container runtime applies to every program it
# runs by default: Docker's (moby's profiles/seccomp/default.json), from the
# Debian package of moby's source, which ships it. The node-wide tests run
# instrumented programs under it (tests/workloads/under_profile.cpp).
# Usage: runtime-profiles.sh DIR. Result:
#   DIR/docker-default.json   the profile
#   DIR/package               "NAME VERSION" of the package it came from
# Idempotent: downloads only when apt's candidate differs from what is there;
# without apt lists or network, a profile already there is kept.
set -euo pipefail

(( $# == 1 )) || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
name=golang-github-docker-docker-dev
member=usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json

candidate() { apt-cache policy "$name" 2>/dev/null | awk '/Candidate:/ {print $2}'; }
want=$(candidate)
if [[ -z $want || $want == "(none)" ]] && [[ $(id -u) -eq 0 ]]; then
  apt-get update -qq >&2 || true  # no lists yet: fetch them once
  want=$(candidate)
fi
have=$(cat "$dir/package" 2>/dev/null || true)
if [[ -z $want || $want == "(none)" ]]; then
  [[ -s $dir/docker-default.json ]] || { echo "runtime-profiles: apt knows no $name package" >&2; exit 1; }
  echo "runtime-profiles: apt knows no $name now, keeping ${have:-the profile there}"
  exit 0
fi
[[ $have == "$name $want" && -s $dir/docker-default.json ]] && exit 0

mkdir -p "$dir"
work=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT  # a failed fetch leaves nothing half-unpacked
echo "runtime-profiles: downloading $name $want (Docker's default seccomp profile)"
# Sandbox user root: the build tree may not be writable by apt's own user.
(cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$name=$want")
dpkg-deb -x "$work"/*.deb "$work/root"
[[ -s $work/root/$member ]] || { echo "runtime-profiles: $member not in $name $want" >&2; exit 1; }
cp "$work/root/$member" "$work/docker-default.json"
mv "$work/docker-default.json" "$dir/docker-default.json"
printf '%s %s\n' "$name" "$want" >"$dir/package"
