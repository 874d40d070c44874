// SPDX-License-Identifier: GPL-2.0
/* Clock adjustments, system-wide: every adjtimex, clock_adjtime, clock_settime and
 * settimeofday call, from any process, stamped with bpf_ktime_get_ns at entry and
 * exit (the kernel applies the change in between) into one small ring that wakes
 * the recorder at once, so it can take correlation points around the change
 * (user/record/recorder.cpp). The arguments are read at entry (user memory,
 * still the caller's), the result at exit. Calls are rare (an NTP client makes a
 * few per second at most): one shared ring is enough.
 *
 * Record layout: include/cptrace_clockadj.h. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "cptrace_clockadj.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 10);
} clockadj_ring SEC(".maps");

/* Entry half of a call in flight, by thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct cp_clockadj_rec);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CP_CLKADJ_CNT_N);
	__type(key, __u32);
	__type(value, __u64);
} clockadj_counters SEC(".maps");

/* struct timex's leading fields (x86-64 layout of include/uapi/linux/timex.h). */
struct timex_head {
	__u32 modes;
	__u32 pad0;
	__s64 offset, freq, maxerror, esterror;
	__s32 status;
	__u32 pad1;
	__s64 constant, precision, tolerance;
	__s64 time_sec, time_usec;
	__s64 tick;
};

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&clockadj_counters, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline struct cp_clockadj_rec *begin(__u32 syscall, __s32 clockid)
{
	static const struct cp_clockadj_rec zero = {};
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	/* A call that cannot be followed is counted as seen and dropped: the
	 * reader then trusts no window of the model (clock_change_candidates.h). */
	if (bpf_map_update_elem(&inflight, &tid, &zero, BPF_ANY)) {
		count(CP_CLKADJ_CNT_SEEN);
		count(CP_CLKADJ_CNT_DROPPED);
		return NULL;
	}
	struct cp_clockadj_rec *r = bpf_map_lookup_elem(&inflight, &tid);
	if (!r) {
		count(CP_CLKADJ_CNT_SEEN);
		count(CP_CLKADJ_CNT_DROPPED);
		return NULL;
	}
	r->enter_ns = bpf_ktime_get_ns();
	r->tgid = id >> 32;
	r->tid = tid;
	r->syscall = syscall;
	r->clockid = clockid;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	return r;
}

#define CP_ADJ_OFFSET_SS_READ 0xa001

/* Reads the caller's timex; a pure read (modes 0, or the adjtime() remainder
 * read) is forgotten: it changes nothing, NTP clients make many, and the
 * recorder itself makes one at every correlation point. */
static __always_inline void read_timex(struct cp_clockadj_rec *r, const void *utx)
{
	struct timex_head t;
	/* Unreadable (not faulted in): kept with read_ok 0, which the reader takes
	 * as a call that may have changed anything, never as a read. */
	if (bpf_probe_read_user(&t, sizeof(t), utx))
		return;
	if (t.modes == 0 || t.modes == CP_ADJ_OFFSET_SS_READ) {
		__u32 tid = r->tid;
		bpf_map_delete_elem(&inflight, &tid);
		return;
	}
	r->modes = t.modes;
	r->offset = t.offset;
	r->freq = t.freq;
	r->status = t.status;
	r->constant = t.constant;
	r->tick = t.tick;
	r->read_ok = 1;
}

static __always_inline void finish(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct cp_clockadj_rec *r = bpf_map_lookup_elem(&inflight, &tid);
	if (!r)
		return; /* entered before we attached */
	r->exit_ns = bpf_ktime_get_ns();
	r->ret = ret;
	count(CP_CLKADJ_CNT_SEEN);
	if (bpf_ringbuf_output(&clockadj_ring, r, sizeof(*r), BPF_RB_FORCE_WAKEUP))
		count(CP_CLKADJ_CNT_DROPPED);
	bpf_map_delete_elem(&inflight, &tid);
}

SEC("tp/syscalls/sys_enter_adjtimex")
int cp_enter_adjtimex(struct trace_event_raw_sys_enter *ctx)
{
	struct cp_clockadj_rec *r = begin(CP_CLKADJ_ADJTIMEX, -1);
	if (r)
		read_timex(r, (const void *)ctx->args[0]);
	return 0;
}

SEC("tp/syscalls/sys_enter_clock_adjtime")
int cp_enter_clock_adjtime(struct trace_event_raw_sys_enter *ctx)
{
	struct cp_clockadj_rec *r = begin(CP_CLKADJ_CLOCK_ADJTIME, (__s32)ctx->args[0]);
	if (r)
		read_timex(r, (const void *)ctx->args[1]);
	return 0;
}

SEC("tp/syscalls/sys_enter_clock_settime")
int cp_enter_clock_settime(struct trace_event_raw_sys_enter *ctx)
{
	struct cp_clockadj_rec *r = begin(CP_CLKADJ_CLOCK_SETTIME, (__s32)ctx->args[0]);
	struct {
		__s64 sec, nsec;
	} ts;
	if (r && !bpf_probe_read_user(&ts, sizeof(ts), (const void *)ctx->args[1])) {
		r->set_sec = ts.sec;
		r->set_nsec = ts.nsec;
		r->read_ok = 1;
	}
	return 0;
}

SEC("tp/syscalls/sys_enter_settimeofday")
int cp_enter_settimeofday(struct trace_event_raw_sys_enter *ctx)
{
	struct cp_clockadj_rec *r = begin(CP_CLKADJ_SETTIMEOFDAY, -1);
	struct {
		__s64 sec, usec;
	} tv;
	/* tv may be NULL (only the time zone is set): read_ok stays 0 then. */
	if (r && ctx->args[0] && !bpf_probe_read_user(&tv, sizeof(tv), (const void *)ctx->args[0])) {
		r->set_sec = tv.sec;
		r->set_nsec = tv.usec * 1000;
		r->read_ok = 1;
	}
	return 0;
}

SEC("tp/syscalls/sys_exit_adjtimex")
int cp_exit_adjtimex(struct trace_event_raw_sys_exit *ctx)
{
	finish(ctx->ret);
	return 0;
}

SEC("tp/syscalls/sys_exit_clock_adjtime")
int cp_exit_clock_adjtime(struct trace_event_raw_sys_exit *ctx)
{
	finish(ctx->ret);
	return 0;
}

SEC("tp/syscalls/sys_exit_clock_settime")
int cp_exit_clock_settime(struct trace_event_raw_sys_exit *ctx)
{
	finish(ctx->ret);
	return 0;
}

SEC("tp/syscalls/sys_exit_settimeofday")
int cp_exit_settimeofday(struct trace_event_raw_sys_exit *ctx)
{
	finish(ctx->ret);
	return 0;
}
