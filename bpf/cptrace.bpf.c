// SPDX-License-Identifier: GPL-2.0
/* Kernel side of `cptrace record`: uprobes on the application library's nop5
 * stub symbols (lib/cp_stubs.S). Each hit becomes one record in the ring buffer
 * of the CPU it fired on; a failed reservation is counted, never silent.
 *
 * Layouts of the records are in include/cptrace_records.h (shared with user/). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "cptrace_records.h"

/* libbpf 1.1 has no BPF_UPROBE; BPF_KPROBE reads the same pt_regs arguments. */

char LICENSE[] SEC("license") = "GPL";

/* 0 = every process; else only this tgid (record -p PID / -- CMD). */
const volatile __u32 filter_tgid = 0;
/* Wake the collector only when this many bytes wait in a ring: a wakeup costs the
 * producing thread ~8 us, so we never wake per event. The collector also polls on
 * a timer, so data below the threshold is drained within a few ms anyway. */
const volatile __u64 wakeup_bytes = 1 << 20;

struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
};

/* One ring buffer per CPU: no cross-CPU contention on the reservation lock.
 * The collector creates the inner rings and fills this array before attaching. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__array(values, struct ring);
} rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CP_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		*c += n; /* per-CPU slot: no atomics needed */
}

/* Returns this CPU's ring, or NULL if the process is filtered out. */
static __always_inline void *my_ring(__u32 *cpu, __u32 *tgid, __u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();
	*tgid = id >> 32;
	*tid = (__u32)id;
	if (filter_tgid && *tgid != filter_tgid)
		return NULL;
	*cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&rings, cpu);
}

static __always_inline void fill_hdr(struct cp_rec_hdr *h, __u16 kind, __u32 cpu,
				     __u32 tgid, __u32 tid, __u32 n)
{
	h->kind = kind;
	h->cpu = cpu;
	h->pid = tgid;
	h->tid = tid;
	h->n = n;
}

static __always_inline __u64 wake_flag(void *rb)
{
	return bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									 : BPF_RB_NO_WAKEUP;
}

/* One kernel-timestamped event record (cp_logTS, cp_channel_closed). */
static __always_inline int record_event(__u16 kind, __u64 now, __u64 channel, __u64 tuple)
{
	__u32 cpu, tgid, tid;
	void *rb = my_ring(&cpu, &tgid, &tid);
	if (!rb)
		return 0;
	count(CP_CNT_SEEN, 1);
	struct cp_event_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count(CP_CNT_DROPPED, 1);
		return 0;
	}
	fill_hdr(&r->h, kind, cpu, tgid, tid, 0);
	r->ktime_ns = now;
	r->channel = channel;
	r->tuple = tuple;
	bpf_ringbuf_submit(r, wake_flag(rb));
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(cp_logTS, __u64 channel, __u64 tuple)
{
	return record_event(CP_REC_EVENT, bpf_ktime_get_ns() /* first: closest to the call */,
			    channel, tuple);
}

SEC("uprobe")
int BPF_KPROBE(cp_batch_submit, const struct cp_batch_entry *entries, __u32 n)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu, tgid, tid;
	void *rb = my_ring(&cpu, &tgid, &tid);
	if (!rb || n == 0)
		return 0;
	if (n > CP_BATCH_MAX) { /* not our library's call: count, keep nothing */
		count(CP_CNT_SEEN, 1);
		count(CP_CNT_READ_FAIL, 1);
		count(CP_CNT_DROPPED, 1);
		return 0;
	}
	count(CP_CNT_SEEN, n);
	/* The verifier wants a constant reservation size: always reserve a full batch. */
	struct cp_batch_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count(CP_CNT_DROPPED, n);
		return 0;
	}
	__u32 bytes = n * sizeof(struct cp_batch_entry);
	if (bytes > sizeof(r->e))
		bytes = sizeof(r->e); /* unreachable; bounds the size for the verifier */
	if (bpf_probe_read_user(r->e, bytes, entries)) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		count(CP_CNT_READ_FAIL, 1);
		count(CP_CNT_DROPPED, n);
		return 0;
	}
	/* The same program serves cp_batch_submit_mono (Java); the cookie says so. */
	__u16 kind = bpf_get_attach_cookie(ctx) == CP_COOKIE_BATCH_MONO ? CP_REC_BATCH_MONO
									   : CP_REC_BATCH;
	fill_hdr(&r->h, kind, cpu, tgid, tid, n);
	r->ktime_ns = now;
	bpf_ringbuf_submit(r, wake_flag(rb));
	return 0;
}

/* cp.Cloudprofiler.logTS from Java: the JNI entry point in libcptrace_jni.so is
 * a nop5 stub called as (JNIEnv *, jclass, jlong channel, jlong tuple). */
SEC("uprobe")
int BPF_KPROBE(cp_jni_logTS, void *env, void *cls, __u64 channel, __u64 tuple)
{
	return record_event(CP_REC_EVENT, bpf_ktime_get_ns(), channel, tuple);
}

/* Channel names: rare, so they are not counted as events. A lost one is still
 * recovered from the process registry when the recording stops. */
SEC("uprobe")
int BPF_KPROBE(cp_channel_announce, __u64 channel, const char *name)
{
	__u32 cpu, tgid, tid;
	void *rb = my_ring(&cpu, &tgid, &tid);
	if (!rb)
		return 0;
	struct cp_channel_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r)
		return 0;
	fill_hdr(&r->h, CP_REC_CHANNEL, cpu, tgid, tid, 0);
	r->ktime_ns = bpf_ktime_get_ns();
	r->channel = channel;
	if (bpf_probe_read_user_str(r->name, sizeof(r->name), name) < 0)
		r->name[0] = 0;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(cp_channel_closed, __u64 channel)
{
	return record_event(CP_REC_CLOSE, bpf_ktime_get_ns(), channel, 0);
}

/* Does nothing: the baseline "empty optimized uprobe" that `cptrace check` and the
 * benchmarks measure cp_logTS against. */
SEC("uprobe")
int cp_empty(void *ctx)
{
	return 0;
}
