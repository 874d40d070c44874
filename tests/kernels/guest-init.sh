#!/bin/sh
# /init of a kernel-matrix guest (tests/integration/test_kernel_matrix.cpp boots
# it under QEMU on each kernel tools/guest-kernels.sh fetched; the archive is
# tools/guest-initramfs.sh's). It runs the checks below and prints one line each:
#
#   CPTRACE-GUEST <check> PASS|FAIL <details>
#
# then CPTRACE-GUEST-END, and powers off. The checks assert what holds under
# TCG too: the BPF programs load, every count is exact (recorded + dropped = seen,
# and what the traced program emitted is what was recorded, once each), and the
# traced programs exit 0 with their own reports intact. Timing stays with the
# host's suite (every hit traps); the one bound checked here is the conversion of
# kernel stamps on the coarse clocksources (check_clock), which holds under TCG.
#
# Run by busybox's ash (pipefail is one of its options). Counts are split into
# words on purpose (`set -- $counts`), and no value holds a space or a glob.
# shellcheck disable=SC2086,SC2046,SC3040
# No `set -e`: a failed check must not keep the next ones from running.
set -uo pipefail

/bin/busybox --install -s /bin
export PATH=/opt/cptrace:/bin
# iproute2's ip (veth, netns), by its path: busybox's sh runs its own applet of a
# name before looking at PATH, and busybox's ip knows neither.
IP=/usr/sbin/ip
OPT=/opt/cptrace
TESTS=$OPT/tests
LIMIT=300  # seconds any one command may take before it counts as hung

mount_all() {
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	mount -t tmpfs tmpfs /tmp
	mount -t tmpfs tmpfs /run
	mount -t tracefs tracefs /sys/kernel/tracing
	mount -t debugfs debugfs /sys/kernel/debug
	mount -t bpf bpf /sys/fs/bpf
}

# ---- reporting ----------------------------------------------------------------
FAILS=""
# Records a mismatch: WHAT was ACTUAL, WANT was expected.
expect() {
	[ "$2" = "$3" ] || FAILS="$FAILS; $1=$2 (want $3)"
}
# Records a failure WHY unless the condition (a `test` expression) holds.
expect_that() {
	why=$1
	shift
	test "$@" || FAILS="$FAILS; $why"
}
# Prints the result line of check NAME, DETAILS appended, and resets FAILS.
finish() {
	if [ -z "$FAILS" ]; then
		echo "CPTRACE-GUEST $1 PASS $2"
	else
		echo "CPTRACE-GUEST $1 FAIL ${FAILS#; } | $2"
	fi
	FAILS=""
}
# Shows the last lines of FILE on the console, each prefixed with NAME.
show_tail() {
	[ -s "$2" ] && tail -n 15 "$2" | sed "s/^/  $1| /"
}
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
# Waits until FILE holds TEXT, at most LIMIT seconds, and while process PID
# (when given) lives; false if it did not come.
wait_for() {
	i=0
	until grep -qs "$1" "$2"; do
		[ $i -lt $((LIMIT * 10)) ] || return 1
		[ -z "${3:-}" ] || kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
		i=$((i + 1))
	done
}

# ---- reading traces -------------------------------------------------------------
# A top-level number of `cptrace info --json` (printed with two-space indents).
info_num() {
	sed -n "s/^  \"$1\": \([0-9][0-9]*\),\{0,1\}\$/\1/p" "$2"
}
# A number of the "net" object of `cptrace info --json`.
info_net_num() {
	sed -n "/^  \"net\": {/,/^  }/ s/^    \"$1\": \([0-9][0-9]*\),\{0,1\}\$/\1/p" "$2"
}
# A number of the workload's own JSON report line.
report_num() {
	sed -n "s/.*\"$1\":\([0-9][0-9]*\).*/\1/p" "$2" | tail -n 1
}
# `cptrace dump --csv DIR` through the awk PROGRAM, which finds the columns by
# name in col[] (the header line is read first); then awk variables NAME=VALUE.
dump_awk() {
	dir=$1 prog=$2
	shift 2
	vars=""
	for v in "$@"; do vars="$vars -v $v"; done
	# shellcheck disable=SC2086 # one word per assignment: values have no spaces
	cptrace dump --csv "$dir" | awk -F, $vars "NR == 1 { for (i = 1; i <= NF; i++) col[\$i] = i; next } $prog"
}

# Records `-- CMD...` into /tmp/NAME (stdout NAME.out, stderr NAME.err), with
# rings large enough that nothing can be dropped: any drop is then a bug. Fails
# (recording why) when the recorder or `cptrace info` fails: nothing else of the
# check can be true then. TCG's TSC may be one the guest's kernel distrusts: it
# is recorded by default and checked by cptrace (the skew across CPUs every
# second here, tsc_checked below).
record() {
	name=$1
	shift
	timeout $LIMIT cptrace record --no-progress --skew-period 1 --ring-mb 16 -o "/tmp/$name" "$@" \
		>"/tmp/$name.out" 2>"/tmp/$name.err"
	rc=$?
	if [ $rc != 0 ]; then
		show_tail "$name" "/tmp/$name.err"
		FAILS="$FAILS; record exit $rc: $(tail -n 1 "/tmp/$name.err")"
		return 1
	fi
	timeout $LIMIT cptrace info --json "/tmp/$name" >"/tmp/$name.info" 2>&1
	rc=$?
	[ $rc = 0 ] || FAILS="$FAILS; info exit $rc: $(tail -n 1 "/tmp/$name.info")"
	return $rc
}

# What the trace /tmp/NAME says of the TSC: the kernel's verdict and what
# cptrace checked itself. A TSC the kernel distrusts is recorded with a note
# saying so; every skew interval measured while recording must meet the start
# and stop ones (TCG's TSC is one counter for all vCPUs: an interval outside
# them would be a wrong measure). Sets TSC_SAID for the result line.
tsc_checked() {
	timeout $LIMIT cptrace info "/tmp/$1" >"/tmp/$1.txt" 2>&1
	verdict=$(sed -n 's/^tsc        \([a-z]*\) by the kernel.*/\1/p' "/tmp/$1.txt")
	check=$(sed -n 's/^tsc check  //p' "/tmp/$1.txt")
	expect_that "no TSC verdict in info" -n "$verdict"
	if [ "$verdict" = distrusted ]; then
		grep -q 'recording, and checking it' "/tmp/$1.err" || FAILS="$FAILS; no note on the distrusted TSC"
	fi
	case "$check" in
	'' | *'met its start and stop ones') ;;
	*) FAILS="$FAILS; tsc check: $check" ;;
	esac
	TSC_SAID="tsc ${verdict:-?}${check:+, $check}"
}

# A network recorder of its own into /tmp/NAME, started before the server
# (whose UDP end gives up after 3 s without a datagram) and stopped with SIGINT
# like a user's Ctrl-C, as the host's --net tests do. No `-- CMD`: that would
# keep only what the command owns, and the receiving end is another process in
# another namespace. net_recorder_start fails (recording why) when the recorder
# does not attach. --net-send-calls: the verifier of this kernel sees the send
# and receive calls' program too (6.3+; 6.1 says it lacks the tracepoint).
net_recorder_start() {
	cptrace record --no-progress --ring-mb 16 --net --net-send-calls -o "/tmp/$1" >"/tmp/$1.rec" 2>"/tmp/$1.err" &
	REC=$!
	wait_for attached "/tmp/$1.err" $REC && return 0
	show_tail "$1" "/tmp/$1.err"
	FAILS="$FAILS; recorder not attached: $(tail -n 1 "/tmp/$1.err")"
	kill -9 $REC 2>/dev/null
	wait $REC
	return 1
}
# Stops the recorder of /tmp/NAME (REC) and summarizes its trace; fails
# (recording why) when it or `cptrace info` fails.
net_recorder_stop() {
	kill -INT $REC
	i=0
	while kill -0 $REC 2>/dev/null && [ $i -lt $((LIMIT * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	kill -9 $REC 2>/dev/null
	wait $REC
	rc=$?
	sed "s/^/  $1| /" "/tmp/$1.err"  # what record says it cannot capture on this kernel
	if [ $rc != 0 ]; then
		FAILS="$FAILS; record exit $rc: $(tail -n 1 "/tmp/$1.err")"
		return 1
	fi
	timeout $LIMIT cptrace info --json "/tmp/$1" >"/tmp/$1.info" 2>&1
	rc=$?
	[ $rc = 0 ] || FAILS="$FAILS; info exit $rc: $(tail -n 1 "/tmp/$1.info")"
	return $rc
}

# The user-event counts every recording must satisfy: nothing dropped or
# filtered, recorded + dropped = seen, and seen = EMITTED + the CLOSES channel
# closes (the probes count those too).
expect_user_accounted() {
	info=/tmp/$1.info
	events=$(info_num events "$info")
	seen=$(info_num seen "$info")
	dropped=$(info_num dropped "$info")
	filtered=$(info_num filtered "$info")
	expect dropped "$dropped" 0
	expect filtered "$filtered" 0
	expect "seen" "$seen" $(($2 + $3))
	expect "recorded+dropped" $((events + dropped)) "$seen"
	grep -q '^  "complete": true' "$info" || FAILS="$FAILS; trace not complete"
}

# ---- the checks -------------------------------------------------------------------

# `cptrace check`: every line recording needs is ok, except the invariant TSC
# and the kernel's verdict on it, which TCG does not earn (the lines are still
# shown in the details).
check_check() {
	t0=$(now)
	timeout $LIMIT cptrace check >/tmp/check.out 2>&1
	rc=$?
	sed 's/^/  check| /' /tmp/check.out
	# Every FAIL line but the TSC's is a failure.
	fails=$(grep '^FAIL' /tmp/check.out | grep -v -e '^FAIL  invariant TSC ' -e "^FAIL  TSC (kernel's verdict) " | sed 's/   */  /g' | tr '\n' ';')
	[ -z "$fails" ] || FAILS="$FAILS; ${fails%;}"
	# And the lines that prove the programs load and attach must be there (a
	# check that died half-way prints no FAIL line either): the fork-safety and
	# follow measurements load their own (a warn line in their place says why not).
	for line in "root" "kernel BTF" "uprobes" "BPF ring buffer" "fork repair (libcptrace)" "follow children"; do
		grep -q "^ok    $line " /tmp/check.out || FAILS="$FAILS; no 'ok $line' line"
	done
	grep -q '^warn  fork after a probe hit ' /tmp/check.out &&
		FAILS="$FAILS; $(grep '^warn  fork after a probe hit ' /tmp/check.out | sed 's/   */  /g')"
	grep -q '^[a-z]*  *probe sites  *nop5 ' /tmp/check.out || FAILS="$FAILS; no probe sites line (attach failed)"
	# Exit 1 is what the TSC lines alone cause; anything else is a crash.
	expect_that "check exit $rc" "$rc" -le 1
	tsc=$(grep -q '^ok    invariant TSC' /tmp/check.out && echo invariant || echo "not invariant")
	nop5=$(sed -n 's/^[a-z]*  *probe sites  *nop5 ([0-9a-f ]*), \([a-z ]*\)[:,].* \([0-9]* ns\/hit recorded\).*/\1, \2/p' /tmp/check.out)
	finish check "tsc $tsc; ${nop5:-no uprobe cost}; $(since "$t0")"
}

# 2 threads x 50,000 events on 2 channels through MODE (single: cp_logTS; batch:
# cp_logTS_batch, handed over by cp_batch_submit): the exact set, once each.
check_workload() {
	name=$1 mode=$2 threads=2 events=50000 channels=2
	t0=$(now)
	emitted=$((threads * events))
	if ! record "$name" -- $TESTS/workload --threads $threads --events $events --channels $channels --mode "$mode"; then
		finish "$name" "$(since "$t0")"
		return
	fi
	expect "workload total" "$(report_num total "/tmp/$name.out")" $emitted
	expect_user_accounted "$name" $emitted $channels
	# user events, the same tuple twice, tuples the workload never emitted on
	# that channel, channel closes
	counts=$(dump_awk "/tmp/$name" '
		$col["kind"] == "user" {
			user++
			tu = $col["tuple"]
			if (tu in got) dup++
			got[tu] = 1
			t = int(tu / 1000000000); i = tu - t * 1000000000
			if (t >= T || i >= E || $col["channel"] != "chan" (i % C)) bad++
		}
		$col["kind"] == "close" { closes++ }
		END { printf "%d %d %d %d\n", user, dup, bad, closes }' T=$threads E=$events C=$channels)
	set -- $counts
	expect recorded "${1:-none}" $emitted
	expect duplicates "${2:-none}" 0
	expect "not emitted" "${3:-none}" 0
	expect closes "${4:-none}" $channels
	tsc_checked "$name"
	finish "$name" "emitted $emitted, recorded ${1:-?}, dropped ${dropped:-?}, seen ${seen:-?}; $TSC_SAID; $(since "$t0")"
}

# A pre-fork server (fork without exec, two generations, both logging paths):
# every generation followed and recorded exactly, none of them failed.
check_fork() {
	rounds=2 workers=2 events=50
	t0=$(now)
	if ! record fork -- $TESTS/prefork --rounds $rounds --workers $workers --events $events; then
		finish fork "$(since "$t0")"
		return
	fi
	expect "prefork failed" "$(report_num failed /tmp/fork.out)" 0
	server=$((rounds * 2 * events)) worker=$((rounds * workers * 4 * events)) child=$((rounds * workers * 2 * events))
	# a worker and its child per worker and round
	expect "prefork children" "$(report_num children /tmp/fork.out)" $((rounds * workers * 2))
	expect "prefork parent_emitted" "$(report_num parent_emitted /tmp/fork.out)" $server
	counts=$(dump_awk /tmp/fork '
		$col["kind"] == "user" {
			n[$col["channel"]]++
			if ($col["channel"] == "server" && ($col["tuple"] in got)) dup++
			if ($col["channel"] == "server") got[$col["tuple"]] = 1
		}
		END { printf "%d %d %d %d\n", n["server"], n["worker"], n["worker.child"], dup }')
	set -- $counts
	expect server "${1:-none}" $server
	expect worker "${2:-none}" $worker
	expect worker.child "${3:-none}" $child
	expect "server duplicates" "${4:-none}" 0
	# The server closes its channel; workers and their children exit with theirs open.
	expect_user_accounted fork $((server + worker + child)) 1
	finish fork "server $1/$server, worker $2/$worker, worker.child $3/$child, dropped ${dropped:-?}; $(since "$t0")"
}

# Programs started by fork+exec, posix_spawn and vfork+exec (2 each): each one
# recorded under its own pid, exactly.
check_spawn() {
	children=2 events=20
	t0=$(now)
	if ! record spawn -- $TESTS/spawner --children $children --events $events; then
		finish spawn "$(since "$t0")"
		return
	fi
	root=$(report_num pid /tmp/spawn.out)
	expect "spawner started" "$(report_num started /tmp/spawn.out)" $((3 * children))
	expect "spawner failed" "$(report_num failed /tmp/spawn.out)" 0
	# spawner events of the root, events of other pids on it, started programs,
	# started programs whose count is not E, events on other channels
	counts=$(dump_awk /tmp/spawn '
		$col["kind"] != "user" { next }
		$col["channel"] == "spawner" { if ($col["pid"] == R) own++; else stray++; next }
		$col["channel"] == "spawned" { n[$col["pid"]]++; next }
		{ other++ }
		END {
			for (p in n) { procs++; if (n[p] != E) wrong++ }
			printf "%d %d %d %d %d\n", own, stray, procs, wrong, other
		}' R="${root:-0}" E=$events)
	set -- $counts
	expect "spawner events" "${1:-none}" $((2 * events))
	expect "spawner events of other pids" "${2:-none}" 0
	expect "programs recorded" "${3:-none}" $((3 * children))
	expect "programs with a wrong count" "${4:-none}" 0
	expect "events on other channels" "${5:-none}" 0
	finish spawn "spawner $1/$((2 * events)), $3/$((3 * children)) programs x $events; $(since "$t0")"
}

# ---- preemption: several threads on one CPU ---------------------------------------
# tests/workloads/preempt on CPU 1: two SCHED_OTHER loggers (EVENTS events each)
# flat out and a
# SCHED_FIFO thread waking every 200 us to log a burst, which on a preemptible
# kernel (PREEMPT_RT, preempt=full) preempts a logger inside its BPF program.
# Each event goes to three channels: "plain" (no handler), "first" (firstlast)
# and "count" (counter 1ms). Everything must be exact: the plain channel's
# events once each, firstlast's the workload's first and last, the counter's
# series adding up to every event, and recorded + dropped + filtered == seen.
check_preempt() {
	mode=$1 events=$2 name=preempt-$1
	t0=$(now)
	# The kernel's preemption model, as its version string says (PREEMPT_RT,
	# PREEMPT_DYNAMIC, PREEMPT or none).
	model=$(uname -v | grep -o 'PREEMPT[_A-Z]*' | head -n 1)
	printf 'first firstlast\ncount counter 1ms\n' >/tmp/preempt.cfg
	if ! record "$name" --config /tmp/preempt.cfg -- $TESTS/preempt --cpu 1 --loggers 2 --events "$events" \
		--period-us 200 --burst 20 --mode "$mode"; then
		finish "$name" "$(since "$t0")"
		return
	fi
	out=/tmp/$name.out info=/tmp/$name.info
	total=$(report_num per_channel "$out")
	expect "SCHED_FIFO thread" "$(report_num fifo "$out")" 1
	expect_that "no FIFO wake-up" "$(report_num fifo_wakeups "$out")" -gt 0
	events=$(info_num events "$info")
	seen=$(info_num seen "$info")
	dropped=$(info_num dropped "$info")
	filtered=$(info_num filtered "$info")
	# 3 channels, each closed once; firstlast keeps 2, counter none.
	expect seen "$seen" $((3 * ${total:-0} + 3))
	expect dropped "$dropped" 0
	expect filtered "$filtered" $((2 * ${total:-0} - 2))
	expect "recorded+dropped+filtered" $((events + dropped + filtered)) "$seen"
	grep -q '^  "complete": true' "$info" || FAILS="$FAILS; trace not complete"
	# plain events, plain duplicates, firstlast events, its first 3 tuples, counted
	# events, events from another CPU
	counts=$(dump_awk "/tmp/$name" '
		$col["kind"] == "user" && $col["channel"] == "plain" { plain++; if ($col["tuple"] in got) dup++; got[$col["tuple"]] = 1 }
		$col["kind"] == "user" && $col["channel"] == "first" { if (++first <= 3) tuples = tuples "/" $col["tuple"] }
		$col["kind"] == "count" && $col["channel"] == "count" { counted += $col["tuple"] }
		$col["kind"] != "close" && $col["cpu"] != 1 { other++ }
		END { printf "%d %d %d %s %d %d\n", plain, dup, first, tuples "/", counted, other }')
	set -- $counts
	expect "plain events" "${1:-none}" "${total:-?}"
	expect "plain duplicates" "${2:-none}" 0
	expect "firstlast events" "${3:-none}" 2
	expect "firstlast tuples" "${4:-none}" "/$(report_num open_tuple "$out")/$(report_num close_tuple "$out")/"
	expect "counter total" "${5:-none}" "${total:-?}"
	expect "events off CPU 1" "${6:-none}" 0
	finish "$name" "${model:-no PREEMPT}: logged ${total:-?} per channel ($(report_num fifo_wakeups "$out") FIFO wake-ups): plain ${1:-?}, firstlast ${3:-?}, counted ${5:-?}, filtered ${filtered:-?}, dropped ${dropped:-?}; $(since "$t0")"
}

# A veth pair: cpv0 (10.199.0.1) here, cpv1 (10.199.0.2) in namespace "peer".
VETH_PROBLEM="unset"
make_veth() {
	[ "$VETH_PROBLEM" = unset ] || return 0
	VETH_PROBLEM=$( {
		insmod /modules/veth.ko &&
		$IP link add cpv0 type veth peer name cpv1 &&
		$IP netns add peer &&
		$IP link set cpv1 netns peer &&
		$IP addr add 10.199.0.1/24 dev cpv0 && $IP link set cpv0 up &&
		$IP -n peer addr add 10.199.0.2/24 dev cpv1 && $IP -n peer link set cpv1 up &&
		$IP -n peer link set lo up
	} 2>&1 >/dev/null) || VETH_PROBLEM="veth pair: $(echo "${VETH_PROBLEM:-failed}" | head -n 3 | tr '\n' ' ')"
}

# `record --net` while a netload client sends COUNT PROTO messages over the veth
# pair to a server in the peer namespace: the application's bytes on both socket
# paths, every packet on the wire at both ends, nothing dropped.
check_net() {
	proto=$1 port=$2 count=$3 name=net-$1
	t0=$(now)
	make_veth
	if [ -n "$VETH_PROBLEM" ]; then
		FAILS="$VETH_PROBLEM"
		finish "$name" "$(since "$t0")"
		return
	fi
	if ! net_recorder_start "$name"; then
		finish "$name" "$(since "$t0")"
		return
	fi
	$IP netns exec peer timeout $LIMIT $TESTS/netload server "$proto" 10.199.0.2 $port $count \
		>"/tmp/$name.srv" 2>&1 &
	srv=$!
	wait_for ready "/tmp/$name.srv" $srv || FAILS="$FAILS; server not ready: $(tail -n 1 "/tmp/$name.srv")"
	timeout $LIMIT $TESTS/netload client "$proto" 10.199.0.2 $port $count >"/tmp/$name.out" 2>&1
	expect "client exit" $? 0
	wait $srv
	expect "server exit" $? 0
	[ -z "$FAILS" ] || { show_tail "$name client" "/tmp/$name.out"; show_tail "$name server" "/tmp/$name.srv"; }
	if ! net_recorder_stop "$name"; then
		finish "$name" "$(since "$t0")"
		return
	fi
	set -- $(sed -n 's/^sent \([0-9]*\) \([0-9]*\)$/\1 \2/p' "/tmp/$name.out")
	sent=${1:-none} cport=${2:-0}
	set -- $(sed -n 's/^received \([0-9]*\) \([0-9]*\)$/\1 \2/p' "/tmp/$name.srv")
	expect "server received" "${1:-none}" "$sent"
	# Per kind, packets and bytes client -> server (send, tx, rx), and the bytes
	# the server's socket received (recv: local address first; an unconnected
	# UDP socket's remote end is 0.0.0.0:0).
	counts=$(dump_awk "/tmp/$name" '
		$col["proto"] != P { next }
		$col["sport"] + 0 == CP && $col["dport"] + 0 == SP { k = $col["kind"]; if ($col["len"] > 0) n[k]++; b[k] += $col["len"] }
		$col["sport"] + 0 == SP && $col["kind"] == "recv" { recv += $col["len"] }
		END { printf "%d %d %d %d %d %d\n", b["send"], n["tx"], b["tx"], n["rx"], b["rx"], recv }' \
		P="$proto" CP="$cport" SP=$port)
	set -- $counts
	# Socket events need the sock_send_length/sock_recv_length tracepoints
	# (Linux 6.3+); without them record says so, and none may appear.
	if grep -q "no sock_send_length tracepoint" "/tmp/$name.err"; then
		expect "socket send bytes (no tracepoint)" "${1:-none}" 0
		sock="no socket events on this kernel (record says so)"
	else
		expect "socket send bytes" "${1:-none}" "$sent"
		sock="socket send/recv exact"
	fi
	if grep -q "no sock_recv_length tracepoint" "/tmp/$name.err"; then
		expect "socket recv bytes (no tracepoint)" "${6:-none}" 0
	else
		expect "socket recv bytes" "${6:-none}" "$sent"
	fi
	if [ "$proto" = udp ]; then
		# One datagram, one packet each way: exact.
		expect "tx datagrams" "${2:-none}" $count
		expect "tx bytes" "${3:-none}" "$sent"
		expect "rx datagrams" "${4:-none}" $count
		expect "rx bytes" "${5:-none}" "$sent"
	else
		# TCP may retransmit: at least the stream, and the receiver read all of it.
		expect_that "tx data bytes ${3:-none} < $sent" "${3:-0}" -ge "${sent:-1}"
		expect_that "rx data bytes ${5:-none} < $sent" "${5:-0}" -ge "${sent:-1}"
	fi
	events=$(info_net_num events "/tmp/$name.info")
	seen=$(info_net_num seen "/tmp/$name.info")
	dropped=$(info_net_num dropped "/tmp/$name.info")
	expect "net dropped" "$dropped" 0
	expect "net recorded+dropped" $((${events:-0} + ${dropped:-0})) "${seen:-none}"
	finish "$name" "sent $sent bytes, tx ${2:-?} rx ${4:-?} data packets, $sock, net events ${events:-?} seen ${seen:-?} dropped ${dropped:-?}; $(since "$t0")"
}

# Kernel stamps on a coarse clocksource (acpi_pm, hpet): switched through sysfs
# in this guest, not booted with `clocksource=` on the command line. Another boot
# per clocksource would add a minute or more each under TCG; the switch costs
# nothing, and the recorder measures the clock's quantum when it starts, so a
# recording begun after the switch is one on that clocksource from its first
# point (meta.json must say so, with no switch inside). `clock_truth run` logs
# cp_logTS events and sends UDP datagrams over the veth pair (both ends its own
# sockets), bracketing each call with TSC reads, while a thread takes
# rdtsc / CLOCK_MONOTONIC / rdtscp truth samples; `clock_truth check` reads the
# trace and asserts, N of N, that every sample's CLOCK_MONOTONIC converted
# through the trace's clock model and every packet's converted stamp meet
# their TSC brackets. Under TCG the guest's TSC is the host's TSC and hpet and
# acpi_pm count QEMU's virtual clock (the host's CLOCK_MONOTONIC): both
# advance linearly together, so the bounds must hold here too, even though
# the guest's kernel does not trust its TSC.
CLOCKSOURCE=/sys/devices/system/clocksource/clocksource0
check_clock() {
	cs=$1 port=$2 events=300 name=clock-$1
	t0=$(now)
	if ! grep -qw "$cs" $CLOCKSOURCE/available_clocksource; then
		FAILS="$cs not offered: available $(cat $CLOCKSOURCE/available_clocksource)"
		finish "$name" "$(since "$t0")"
		return
	fi
	make_veth
	if [ -n "$VETH_PROBLEM" ]; then
		FAILS="$VETH_PROBLEM"
		finish "$name" "$(since "$t0")"
		return
	fi
	echo "$cs" >$CLOCKSOURCE/current_clocksource
	expect current_clocksource "$(cat $CLOCKSOURCE/current_clocksource)" "$cs"
	if record "$name" --net -- $TESTS/clock_truth run "/tmp/$name.truth" --events $events \
		--udp /run/netns/peer 10.199.0.2 "$port"; then
		timeout $LIMIT $TESTS/clock_truth check "/tmp/$name" "/tmp/$name.truth" --clocksource "$cs" --port "$port" \
			>"/tmp/$name.check" 2>&1
		expect "clock_truth check exit" $? 0
		grep -q '^FAIL' "/tmp/$name.check" && FAILS="$FAILS; $(sed -n 's/^FAIL \([^|]*\) |.*/\1/p' "/tmp/$name.check")"
		info="/tmp/$name.info"
		expect dropped "$(info_num dropped "$info")" 0
		expect "net dropped" "$(info_net_num dropped "$info")" 0
	fi
	finish "$name" "$(sed 's/^[A-Z]* \([^|]*| \)\{0,1\}//' "/tmp/$name.check" 2>/dev/null | head -n 1); $(since "$t0")"
}

# The checks this boot runs: those named in the kernel's command line
# (cptrace.checks=a,b,...: the kernel matrix gives the PREEMPT_RT kernels a
# shorter list), else all. CHECKS is read in main, once /proc is mounted.
CHECKS=""
want() {
	[ -z "$CHECKS" ] && return 0
	for c in $CHECKS; do [ "$c" = "$1" ] && return 0; done
	return 1
}

main() {
	mount_all
	hostname guest
	$IP link set lo up
	echo "CPTRACE-GUEST-BOOT $(uname -r) up $(now)s"
	CHECKS=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^cptrace\.checks=//p' | tr ',' ' ')
	want check && check_check
	# cp_logTS buffers single events on these kernels (before 6.18); single-site
	# sends each through its probe site instead (one int3 trap per event).
	want single && check_workload single single
	export CPTRACE_SINGLE=site
	want single-site && check_workload single-site single
	unset CPTRACE_SINGLE
	want batch && check_workload batch batch
	want fork && check_fork
	want spawn && check_spawn
	want net-udp && check_net udp 7005 150
	want net-tcp && check_net tcp 7001 100
	boot_cs=$(cat $CLOCKSOURCE/current_clocksource)
	echo "CPTRACE-GUEST-CLOCKSOURCES current $boot_cs available $(cat $CLOCKSOURCE/available_clocksource)"
	want clock-acpi_pm && check_clock acpi_pm 7011
	want clock-hpet && check_clock hpet 7012
	echo "$boot_cs" >$CLOCKSOURCE/current_clocksource
	# The single site's handlers under preemption (buffered singles are what
	# preempt-batch covers).
	export CPTRACE_SINGLE=site
	want preempt-single && check_preempt single 4000
	unset CPTRACE_SINGLE
	# A batch probe fires once per 256 events: more events, as many probe runs.
	want preempt-batch && check_preempt batch 40000
	echo "CPTRACE-GUEST-END up $(now)s"
}

main 2>&1
poweroff -f
