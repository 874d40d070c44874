#!/usr/bin/env bash
# Installs every Debian package cptrace's build, tests, benchmarks and demo need,
# then DuckDB for node from the npm registry (tools/duckdb, pinned by its lock file).
# Idempotent: packages already present are not fetched again, and apt's lists are
# refreshed only when something is missing.
set -euo pipefail

PKGS=(
  build-essential make pkg-config git      # toolchain
  cmake                                    # tests: find_package(cptrace) against `make install`
  clang llvm libclang-rt-14-dev            # BPF target, libFuzzer + ASan runtime
  clang-format                             # make format, make check-format (in make test)
  libbpf-dev bpftool libelf-dev zlib1g-dev # BPF loader, skeleton generator, its deps
  libzstd-dev                              # frame compression
  libdeflate-dev                           # CRC-32 of frames (zlib's value, faster)
  libcli11-dev                             # command line
  nlohmann-json3-dev libfmt-dev            # trace metadata (JSON), formatting
  libssl-dev                               # HMAC-SHA256 of MinRTT probes (OpenSSL libcrypto)
  libgtest-dev                             # unit and integration tests
  iproute2 nftables                        # network-namespace testbed
  openjdk-17-jdk-headless                  # jni/: cptrace.jar, JNI headers, JVM tests
  babeltrace2                              # tests: reads `cptrace export ctf` output
  chromium                                 # tests: renders `cptrace report` headless
  time                                     # tests, bench: peak memory of the analysis (GNU time)
  python3                                  # bench: figure scripts (run.sh, zero_drop.py)
  nodejs                                   # tools/duckdb: query.mjs, export-parquet.mjs (DuckDB on `export table`)
  qemu-system-x86 busybox-static cpio      # tests: boot Debian's 6.1 and 6.12 kernels (TCG) on an initramfs
  xz-utils zstd                            # tests: decompress those kernels' packaged modules (.ko.xz/.ko.zst)
  chrony                                   # tests: a real chronyd steers the clock (SlewTruth), never as a service
  dpkg-dev lintian help2man man-db         # make deb: Depends (dpkg-shlibdeps), package checks, man pages from --help
  yamllint python3-yaml                    # tests: lint and read deploy/cptrace-node.yaml (NodeWide.DaemonSet*)
  openssh-server openssh-client            # tests: cluster nodes reached over ssh (sshd in a namespace, never as a service)
  golang-go                                # tests: a Go program logging through cgo (tests/workloads/go)
  libseccomp-dev                           # tests: programs under Docker's default seccomp profile (under_profile)
)
# npm: Debian's package, unless a node that brings its own npm is installed
# (Debian's npm conflicts with such a nodejs).
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # chrony's package starts and enables chronyd, which would steer the clock under
  # every clock test and ask the pool servers of /etc/chrony/chrony.conf. The tests
  # run their own chronyd (private config, no server, no port). So the service is
  # masked before the package can start it, and the maintainer scripts are told
  # not to start services at all (policy-rc.d 101, unless the machine has its own).
  policy=/usr/sbin/policy-rc.d
  # openssh-server's package starts sshd on port 22 of the machine; the cluster tests
  # start their own sshd inside a namespace, so the service is masked the same way.
  if [[ " ${missing[*]} " == *" chrony "* || " ${missing[*]} " == *" openssh-server "* ]]; then
    if [[ -d /run/systemd/system ]]; then
      [[ " ${missing[*]} " == *" chrony "* ]] && systemctl mask --quiet chrony.service
      [[ " ${missing[*]} " == *" openssh-server "* ]] && systemctl mask --quiet ssh.service ssh.socket
    fi
    if [[ ! -e $policy ]]; then
      printf '#!/bin/sh\n# install-deps: no service starts while it installs\nexit 101\n' >"$policy"
      chmod 755 "$policy"
      trap 'rm -f "$policy"' EXIT
    fi
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [[ $(trap -p EXIT) ]]; then
    rm -f "$policy"
    trap - EXIT
  fi
fi

# chrony's service stays stopped, disabled and masked, also where the package was
# already installed: a chronyd steering the clock would fight the clock tests
# (they adjust it themselves and start their own chronyd), so the tests and an
# NTP service cannot share a machine. Idempotent: acts only on what is not so yet.
if [[ $(id -u) -eq 0 ]] && dpkg-query -W -f='${Status}' chrony 2>/dev/null | grep -q "install ok installed"; then
  if [[ -d /run/systemd/system ]]; then
    if systemctl --quiet is-active chrony.service; then
      echo "install-deps: stopping chrony.service (the clock tests run their own chronyd)"
      systemctl stop chrony.service
    fi
    if [[ $(systemctl is-enabled chrony.service 2>/dev/null) != masked ]]; then
      echo "install-deps: disabling and masking chrony.service"
      systemctl disable --quiet chrony.service 2>/dev/null || true
      systemctl mask --quiet chrony.service
    fi
  elif [[ -x /etc/init.d/chrony ]]; then
    # No systemd (a container): the SysV script, and no boot links.
    if /etc/init.d/chrony status >/dev/null 2>&1; then
      echo "install-deps: stopping the chrony service (the clock tests run their own chronyd)"
      /etc/init.d/chrony stop >/dev/null
    fi
    if compgen -G '/etc/rc[2345].d/S*chrony' >/dev/null; then
      echo "install-deps: disabling the chrony service's boot links"
      update-rc.d chrony disable >/dev/null 2>&1
    fi
  fi
fi

# DuckDB's node bindings (the native library ships inside the package), at the
# version tools/duckdb/package-lock.json pins, only when that version is not
# already there. `npm install --no-save` rather than `npm ci`: the lock file lists
# the bindings of the platform it was made on only (a registry mirror may serve no
# others), which `npm ci` refuses as out of sync; --no-save never rewrites it.
duckdb_dir="$(cd "$(dirname "$0")" && pwd)/duckdb"
want=$(node -p "require('$duckdb_dir/package-lock.json').packages['node_modules/@duckdb/node-api'].version")
have=$(node -p "try { require('$duckdb_dir/node_modules/@duckdb/node-api/package.json').version } catch { '' }")
if [[ "$want" != "$have" ]]; then
  echo "install-deps: npm install in tools/duckdb (@duckdb/node-api $want)"
  (cd "$duckdb_dir" && npm install --no-save --no-audit --no-fund --loglevel=error)
fi
