#!/usr/bin/env bash
# testbed.sh — N "nodes" on one kernel: network namespaces joined through a router
# namespace whose forwarder (build/netdelay) delays every packet. See docs/testbed.md.
#
#   testbed.sh up N [--delay US] [--jitter US] [--loss PCT] [--asym NODE:US ...]
#                   [--asym-from NODE:US ...] [--loss-to NODE:PCT ...] [--prefix NAME]
#                   [--rt PRIO] [--spin US] [--seed N] [--gso] [--netdelay PATH]
#   testbed.sh down [--prefix NAME]
#   testbed.sh status [--prefix NAME]
#
# Namespaces: ${prefix}1 .. ${prefix}N (nodes), ${prefix}r (router); default prefix cpn.
# Node K: interface eth0, 10.77.K.2/24, fd77::K:2/112, MAC 02:77:00:00:KK:02.
# Router: interface toK per node, 10.77.K.1/24, fd77::K:1/112, MAC 02:77:00:00:KK:01.
# Nodes route 10.77.0.0/16 and fd77::/96 (nothing else) via the router.
# One-way delay node I -> node J (I != J):
#     delay + asym-from(I) + asym(J) + U[0, jitter]      (FIFO per (I, J) path: no reordering)
# Loss: every packet leaving the router toward node J is dropped with probability
#     loss-to(J) if given, else loss   (nftables, netdev egress hook in the router).
# Forwarder: SCHED_FIFO priority --rt (default 10; 0 = normal scheduling), busy-waits only
# the last --spin us before a packet is due. --gso lets TCP send 64 KiB super-packets
# (default: one MSS-sized packet per frame, as on a real wire).
# Everything is private: addresses exist only inside namespaces this script creates.
set -eEuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
STATE_ROOT=${CPTESTBED_STATE:-/run/cptrace-testbed}

die() { echo "testbed: $*" >&2; exit 1; }
usage() {
    sed -n '2,/^set -eEuo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

check_prefix() {
    # Not ending in a digit keeps ${p}[0-9]+ and ${p}r from matching another prefix's namespaces.
    [[ $1 =~ ^[A-Za-z][A-Za-z0-9_-]{0,30}[A-Za-z_-]$ || $1 =~ ^[A-Za-z]$ ]] ||
        die "bad --prefix '$1' (letters, digits, '_' or '-', 1-32 chars, must start with a letter and not end with a digit)"
}

mac_of() { printf '02:77:00:00:%02x:%02x' "$1" "$2"; }

# Namespaces that belong to prefix $1 (existing ones only).
our_namespaces() {
    local p=$1
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${p}(r|[0-9]+)\$" || true
}

lock_prefix() {
    mkdir -p "$STATE_ROOT"
    exec 9>"$STATE_ROOT/.$1.lock"
    flock -w 60 9 || die "could not lock testbed '$1'"
}

kill_pid() {  # kill_pid PID: TERM, wait up to 2 s, KILL (never this script or its caller)
    local pid=$1 i
    [[ $pid == "$$" || $pid == "$BASHPID" || $pid == "$PPID" ]] && return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do
        alive "$pid" || return 0
        sleep 0.02
    done
    kill -KILL "$pid" 2>/dev/null || true
}

alive() {  # a zombie (exited, not yet reaped by its parent) counts as gone
    local s
    s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $s && $s != Z && $s != X ]]
}

do_down() {
    local p=$1 st="$STATE_ROOT/$1" ns pid
    if [[ -f $st/netdelay.pid ]]; then
        pid=$(<"$st/netdelay.pid")
        if is_uint "$pid" && [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q netdelay; then
            kill_pid "$pid"
        fi
    fi
    # Anything still running inside our namespaces (a crashed run's forwarder, a test's
    # servers) would keep the namespace alive after `ip netns del`: end it.
    for ns in $(our_namespaces "$p"); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill_pid "$pid"; done
    done
    for ns in $(our_namespaces "$p"); do
        # Deleting a node namespace destroys its veth pair with it.
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$st"
    [[ -z $(our_namespaces "$p") ]] || die "could not remove every namespace of '$p'"
}

find_netdelay() {
    if [[ -n ${NETDELAY:-} ]]; then
        [[ -x $NETDELAY ]] || die "NETDELAY=$NETDELAY is not executable"
        echo "$NETDELAY"
        return
    fi
    local b="$REPO/build/netdelay"
    if [[ ! -x $b || $REPO/tools/netdelay.cpp -nt $b ]]; then
        make -s -C "$REPO" build/netdelay >&2 || die "could not build build/netdelay"
    fi
    echo "$b"
}

do_up() {
    local n=$1 p=$2
    local st="$STATE_ROOT/$p" r="${p}r" k ns mn mr i
    do_down "$p"
    mkdir -p "$st"
    trap 'trap - ERR; echo "testbed: setup failed, tearing down" >&2; do_down "$p" || true' ERR

    ip netns add "$r"
    ip netns exec "$r" sh -c '
        sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0 \
              net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.default.send_redirects=0 \
              net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.default.accept_ra=0 \
              net.ipv6.conf.default.router_solicitations=0'
    ip -n "$r" link set lo up
    for ((k = 1; k <= n; k++)); do
        ns="$p$k"
        ip netns add "$ns"
        ip netns exec "$ns" sh -c '
            sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0 \
                  net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.default.accept_ra=0 \
                  net.ipv6.conf.default.router_solicitations=0 \
                  "net.ipv4.ping_group_range=0 2147483647"'
        ip -n "$ns" link set lo up
        mn=$(mac_of "$k" 2)
        mr=$(mac_of "$k" 1)
        # Created directly inside the namespaces: no name ever exists in the caller's namespace.
        ip link add eth0 address "$mn" netns "$ns" $GSO_OPT type veth \
            peer name "to$k" address "$mr" netns "$r" $GSO_OPT
        ip -n "$ns" addr add "10.77.$k.2/24" dev eth0
        ip -n "$ns" addr add "fd77::$k:2/112" dev eth0 nodad
        ip -n "$r" addr add "10.77.$k.1/24" dev "to$k"
        ip -n "$r" addr add "fd77::$k:1/112" dev "to$k" nodad
        ip -n "$ns" link set eth0 up
        ip -n "$r" link set "to$k" up
        # Static neighbours both ways: no ARP / neighbour discovery on the data path.
        ip -n "$ns" neigh replace "10.77.$k.1" lladdr "$mr" dev eth0 nud permanent
        ip -n "$ns" neigh replace "fd77::$k:1" lladdr "$mr" dev eth0 nud permanent
        ip -n "$r" neigh replace "10.77.$k.2" lladdr "$mn" dev "to$k" nud permanent
        ip -n "$r" neigh replace "fd77::$k:2" lladdr "$mn" dev "to$k" nud permanent
        ip -n "$ns" route add 10.77.0.0/16 via "10.77.$k.1" dev eth0
        ip -n "$ns" -6 route add fd77::/96 via "fd77::$k:1" dev eth0
    done

    # Router kernel: never forward (the forwarder does); loss on the egress hook, which
    # also sees what the forwarder sends through its AF_PACKET sockets.
    {
        echo "table inet cptb_noforward {"
        echo "  chain nofwd { type filter hook forward priority 0; policy drop; }"
        echo "}"
        local any_loss=0 lp
        for ((k = 1; k <= n; k++)); do
            lp=${LOSS_TO[$k]:-$LOSS}
            [[ $lp == 0 ]] || any_loss=1
        done
        if ((any_loss)); then
            echo "table netdev cptb_loss {"
            for ((k = 1; k <= n; k++)); do
                lp=${LOSS_TO[$k]:-$LOSS}
                [[ $lp == 0 ]] && continue
                echo "  chain eg_to$k { type filter hook egress device \"to$k\" priority 0;"
                echo "    meta protocol { ip, ip6 } numgen random mod 10000 < $(pct_bp "$lp") counter drop; }"
            done
            echo "}"
        fi
    } >"$st/router.nft"
    ip netns exec "$r" nft -f "$st/router.nft"

    local nd
    nd=$(find_netdelay)
    local args=(--delay "$DELAY" --jitter "$JITTER" --rt "$RT" --stats "$st/stats" --ready "$st/ready")
    [[ -n $SEED ]] && args+=(--seed "$SEED")
    [[ -n $SPIN ]] && args+=(--spin "$SPIN")
    for ((k = 1; k <= n; k++)); do
        args+=(--link "to$k,$(mac_of "$k" 2),10.77.$k.0/24,fd77::$k:0/112,${ASYM_TO[$k]:-0},${ASYM_FROM[$k]:-0}")
    done
    echo "$nd ${args[*]}" >"$st/netdelay.cmd"
    setsid ip netns exec "$r" "$nd" "${args[@]}" </dev/null >"$st/netdelay.log" 2>&1 9>&- &
    for ((i = 0; i < 100; i++)); do
        [[ -s $st/ready ]] && break
        kill -0 $! 2>/dev/null || break
        sleep 0.05
    done
    if [[ ! -s $st/ready ]]; then
        echo "testbed: forwarder did not start ($nd); its output:" >&2
        cat "$st/netdelay.log" >&2 || true
        false  # -> ERR trap: tear down
    fi
    head -n1 "$st/ready" >"$st/netdelay.pid"
    trap - ERR

    cat >"$st/config" <<EOF
PREFIX=$p
NODES=$n
DELAY_US=$DELAY
JITTER_US=$JITTER
LOSS_PCT=$LOSS
ASYM_TO="$(for k in "${!ASYM_TO[@]}"; do printf '%s:%s ' "$k" "${ASYM_TO[$k]}"; done)"
ASYM_FROM="$(for k in "${!ASYM_FROM[@]}"; do printf '%s:%s ' "$k" "${ASYM_FROM[$k]}"; done)"
LOSS_TO="$(for k in "${!LOSS_TO[@]}"; do printf '%s:%s ' "$k" "${LOSS_TO[$k]}"; done)"
EOF
    print_scheme "$p"
}

pct_bp() {  # percent (up to 2 decimals) -> basis points of 10000
    awk -v x="$1" 'BEGIN { printf "%d", x * 100 + 0.5 }'
}

print_scheme() {
    local p=$1 st="$STATE_ROOT/$1" k
    # shellcheck disable=SC1091
    source "$st/config"
    echo "testbed '$p': $NODES nodes, router namespace ${p}r, forwarder pid $(cat "$st/netdelay.pid" 2>/dev/null || echo '?')"
    printf '  %-4s %-12s %-5s %-14s %-16s %-18s %s\n' node namespace if IPv4 IPv6 MAC "to/from us, loss-to %"
    for ((k = 1; k <= NODES; k++)); do
        printf '  %-4s %-12s %-5s %-14s %-16s %-18s %s\n' "$k" "$p$k" eth0 "10.77.$k.2/24" "fd77::$k:2/112" \
            "$(mac_of "$k" 2)" "$(cfg_get "$ASYM_TO" "$k" 0)/$(cfg_get "$ASYM_FROM" "$k" 0), $(cfg_get "$LOSS_TO" "$k" "$LOSS_PCT")"
    done
    echo "  router ${p}r: interface toK = 10.77.K.1/24, fd77::K:1/112, MAC 02:77:00:00:KK:01"
    echo "  one-way I->J = ${DELAY_US}us + from(I) + to(J) + U[0,${JITTER_US}us]; loss per router egress ${LOSS_PCT}% unless loss-to"
}

cfg_get() {  # cfg_get "K:V K:V" K default
    local kv
    for kv in $1; do
        [[ ${kv%%:*} == "$2" ]] && { echo "${kv#*:}"; return; }
    done
    echo "$3"
}

do_status() {
    local p=$1 st ns pid
    if [[ -z $p ]]; then
        local any=0
        for st in "$STATE_ROOT"/*/; do
            [[ -f $st/config ]] || continue
            any=1
            do_status "$(basename "$st")"
        done
        ((any)) || echo "no testbed is up (state in $STATE_ROOT)"
        ns=$(our_namespaces cpn | tr '\n' ' ')
        [[ -z $ns || -f $STATE_ROOT/cpn/config ]] ||
            echo "leftover namespaces of prefix cpn: $ns(run: testbed.sh down)"
        return 0
    fi
    st="$STATE_ROOT/$p"
    if [[ ! -f $st/config ]]; then
        ns=$(our_namespaces "$p" | tr '\n' ' ')
        if [[ -n $ns ]]; then echo "testbed '$p': leftover namespaces: $ns(run: testbed.sh down --prefix $p)"
        else echo "testbed '$p': down"; fi
        return 0
    fi
    print_scheme "$p"
    echo "  namespaces present: $(our_namespaces "$p" | tr '\n' ' ')"
    pid=$(cat "$st/netdelay.pid" 2>/dev/null || true)
    if [[ -n $pid ]] && alive "$pid"; then
        rm -f "$st/stats"
        kill -USR1 "$pid"
        for ((i = 0; i < 20; i++)); do [[ -f $st/stats ]] && break; sleep 0.05; done
        echo "  forwarder running (pid $pid); counters:"
        [[ -f $st/stats ]] && sed 's/^/    /' "$st/stats"
        echo "  forwarder CPU: $(sed 's/.*) //' "/proc/$pid/stat" | awk -v hz="$(getconf CLK_TCK)" \
            '{printf "%.2f", ($12 + $13) / hz}')s since start"
    else
        echo "  forwarder NOT running; last log:"
        tail -n5 "$st/netdelay.log" 2>/dev/null | sed 's/^/    /'
    fi
}

# ---- command line -----------------------------------------------------------------
[[ $# -ge 1 ]] || usage
CMD=$1
shift
[[ $CMD == up || $CMD == down || $CMD == status ]] || usage
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces)"
N=""
PREFIX=cpn
PREFIX_SET=0
DELAY=0
JITTER=0
LOSS=0
SPIN=""
RT=10
SEED=""
GSO_OPT="gso_max_segs 1"
declare -A ASYM_TO=() ASYM_FROM=() LOSS_TO=()
if [[ $CMD == up ]]; then
    [[ $# -ge 1 ]] && is_uint "$1" || die "usage: testbed.sh up N [options]"
    N=$1
    shift
    ((N >= 2 && N <= 250)) || die "N must be 2..250"
fi
while [[ $# -gt 0 ]]; do
    opt=$1
    [[ $# -ge 2 || $opt == --gso ]] || die "missing value for $opt"
    case $opt in
    --prefix) PREFIX=$2; PREFIX_SET=1 ;;
    --delay) is_num "$2" || die "bad --delay $2"; DELAY=$2 ;;
    --jitter) is_num "$2" || die "bad --jitter $2"; JITTER=$2 ;;
    --loss) is_num "$2" && awk -v x="$2" 'BEGIN{exit !(x<=100)}' || die "bad --loss $2"; LOSS=$2 ;;
    --spin) is_num "$2" || die "bad --spin $2"; SPIN=$2 ;;
    --rt) is_uint "$2" || die "bad --rt $2"; RT=$2 ;;
    --seed) is_uint "$2" || die "bad --seed $2"; SEED=$2 ;;
    --netdelay) NETDELAY=$2 ;;
    --gso) GSO_OPT=""; shift; continue ;;
    --asym | --asym-from | --loss-to)
        [[ $2 =~ ^([0-9]+):([0-9]+(\.[0-9]+)?)$ ]] || die "bad $opt $2 (want NODE:VALUE)"
        k=${BASH_REMATCH[1]} v=${BASH_REMATCH[2]}
        [[ $CMD == up ]] && ((k >= 1 && k <= N)) || die "$opt: node $k is not 1..$N"
        case $opt in
        --asym) ASYM_TO[$k]=$v ;;
        --asym-from) ASYM_FROM[$k]=$v ;;
        --loss-to) awk -v x="$v" 'BEGIN{exit !(x<=100)}' || die "bad $opt $2"; LOSS_TO[$k]=$v ;;
        esac
        ;;
    *) die "unknown option $opt" ;;
    esac
    shift 2
done
check_prefix "$PREFIX"

case $CMD in
up)
    lock_prefix "$PREFIX"
    do_up "$N" "$PREFIX"
    ;;
down)
    lock_prefix "$PREFIX"
    do_down "$PREFIX"
    echo "testbed '$PREFIX': down"
    ;;
status)
    if ((PREFIX_SET)); then do_status "$PREFIX"; else do_status ""; fi
    ;;
*) usage ;;
esac
