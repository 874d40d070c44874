// SPDX-License-Identifier: GPL-2.0
/* Kernel side of `cptrace record`: uprobes on the nop5 of the application
 * library's probe sites (lib/cp_stubs.S). Each hit becomes one record in the ring
 * buffer of the CPU it fired on; a failed reservation is counted, never silent.
 * An event's time is the site's own stamp (rdtsc at the call, in rax:
 * lib/probe_site.h), never a clock read here: no NTP slew, no entry delay.
 *
 * Layouts of the records are in include/cptrace_records.h (shared with user/). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cptrace_records.h"
#include "ring_common.h"

/* libbpf 1.1 has no BPF_UPROBE; BPF_KPROBE reads the same pt_regs arguments. */

char LICENSE[] SEC("license") = "GPL";

/* 0 = every process; else only this tgid (record -p PID / -- CMD). */
const volatile __u32 filter_tgid = 0;
/* Wake the collector only when this many bytes wait in a ring (cp_wake_flag). */
const volatile __u64 wakeup_bytes = 1 << 20;

/* What this kernel offers, set by the loader (user/probe/kernel_features.h)
 * before load. The verifier knows these constants and never walks the branches
 * they rule out, so a helper in a dead branch is not held against the program
 * on a kernel without it (kfuncs are another matter: CP_STAGE_VARIANT). */
/* 1 when the staged variants of the programs are loaded (bpf_preempt_disable,
 * 6.10+); else the unstaged ones run and each single event is its own ring
 * record (CP_REC_EVENT). */
const volatile __u8 stage_singles = 1;
/* bpf_loop (5.17+): channel handlers on the batch path. */
const volatile __u8 have_bpf_loop = 1;

/* One ring buffer per CPU (no cross-CPU contention on the reservation lock) and
 * the per-CPU counters (bpf/ring_common.h). */
CP_PER_CPU_RINGS(rings);
CP_PER_CPU_COUNTERS(counters, CP_CNT_MAX);

/* Every counter update is atomic, although the counters are per-CPU: a uprobe
 * program runs with migration disabled but, on a kernel with full preemption
 * (preempt=full, PREEMPT_RT), not with preemption disabled, so another thread
 * on the same CPU can run the same program between the load and the store of a
 * plain increment and one of the two counts would be lost. An uncontended
 * locked add on a CPU-local line costs a few ns against the ~1 us of the hit.
 * (The stage itself is touched with preemption disabled, below.)
 * tests/integration/test_record.cpp: two threads pinned to one CPU. */
static __always_inline void count(__u32 idx, __u64 n)
{
	cp_count_atomic(&counters, idx, n);
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
	return cp_ring_of_cpu(&rings, *cpu);
}

static __always_inline void fill_hdr(struct cp_rec_hdr *h, __u16 kind, __u32 cpu, __u32 tgid, __u32 tid,
				     __u32 n)
{
	h->kind = kind;
	h->cpu = cpu;
	h->pid = tgid;
	h->tid = tid;
	h->n = n;
}

static __always_inline __u64 wake_flag(void *rb)
{
	return cp_wake_flag(rb, wakeup_bytes);
}

/* ---- Staged single events (include/cptrace_records.h says why) --------------
 * The stage is touched with preemption disabled, so two threads on one CPU
 * never interleave in it, whatever the kernel's preemption model. */
/* __weak: absent before 6.10, where only the unstaged variants, which hold no
 * call to them, are loaded (CP_STAGE_VARIANT below). */
extern void bpf_preempt_disable(void) __ksym __weak;
extern void bpf_preempt_enable(void) __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cp_stage);
} stages SEC(".maps");

/* The staged events go to the ring as one record (preemption disabled). */
static __always_inline void hand_over_stage(struct cp_stage *st, void *rb, __u32 cpu, __u32 tgid, __u32 tid)
{
	__u32 n = st->n;
	if (!n)
		return;
	st->n = 0;
	if (n > CP_STAGE_MAX)
		n = CP_STAGE_MAX; /* unreachable */
	struct cp_singles_rec *r = rb ? bpf_ringbuf_reserve(rb, sizeof(*r), 0) : NULL;
	if (!r) {
		count(CP_CNT_DROPPED, n);
		return;
	}
	fill_hdr(&r->h, CP_REC_SINGLES, cpu, tgid, tid, n);
	__builtin_memcpy(r->e, st->e, sizeof(r->e));
	bpf_ringbuf_submit(r, wake_flag(rb));
}

/* Before any other record of this CPU: its staged events go first. */
static __always_inline void flush_stage(void *rb, __u32 cpu, __u32 tgid, __u32 tid, const int staged)
{
	__u32 zero = 0;
	if (!staged)
		return; /* nothing is ever staged */
	bpf_preempt_disable();
	struct cp_stage *st = bpf_map_lookup_elem(&stages, &zero);
	if (st)
		hand_over_stage(st, rb, cpu, tgid, tid);
	bpf_preempt_enable();
}

static __always_inline void stage_event(void *rb, __u64 tsc, __u64 channel, __u64 tuple, __u32 cpu,
					__u32 tgid, __u32 tid)
{
	__u32 zero = 0;
	bpf_preempt_disable();
	struct cp_stage *st = bpf_map_lookup_elem(&stages, &zero);
	if (!st) {
		count(CP_CNT_DROPPED, 1); /* unreachable: a one-element array */
	} else {
		if (st->n >= CP_STAGE_MAX)
			hand_over_stage(st, rb, cpu, tgid, tid); /* unreachable: emptied when full */
		__u32 i = st->n & (CP_STAGE_MAX - 1);
		struct cp_single_entry *e = &st->e[i];
		e->tsc = tsc;
		e->channel = channel;
		e->tuple = tuple;
		e->pid = tgid;
		e->tid = tid;
		st->n = i + 1;
		if (i + 1 == CP_STAGE_MAX)
			hand_over_stage(st, rb, cpu, tgid, tid);
	}
	bpf_preempt_enable();
}

/* ---- Channel handlers --------------------------------------------------------
 * What a handler discards never reaches a ring: it is only counted (FILTERED).
 * Layouts and the meaning of each kind: include/cptrace_records.h. */

/* Channel id -> handler; key 0 is the default. No preallocation: an update
 * replaces the element and frees the old one after an RCU grace period, so a
 * program that looked the old one up keeps reading a consistent value. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct cp_handler);
} handlers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct cp_hstate_key);
	__type(value, struct cp_hstate);
} hstate SEC(".maps");

/* Per-CPU state of firstlast and counter, per lane (CP_LANES): a lane other
 * than 0 only gets an element when a preempting thread needed it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cp_slot_key);
	__type(value, struct cp_last_slot);
} last_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct cp_slot_key);
	__type(value, struct cp_count_slot);
} count_slots SEC(".maps");

/* Scratch for filtering a batch before it is reserved in a ring, one per lane. */
struct batch_scratch {
	struct cp_batch_entry e[CP_BATCH_MAX];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CP_LANES);
	__type(key, __u32);
	__type(value, struct batch_scratch);
} scratch SEC(".maps");

/* ---- Lanes (include/cptrace_records.h, CP_LANES) -----------------------------
 * Each CPU's lanes are busy words, claimed by compare-and-exchange: a plain
 * test-and-set could be preempted between its test and its set. Nothing waits
 * for a busy lane (its holder may be the thread this one preempted, which
 * cannot run again on this CPU before this one is done). */
struct cp_lanes {
	__u64 busy[CP_LANES];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cp_lanes);
} lanes SEC(".maps");

/* The index of a lane of this CPU now claimed, or -1 when none is free. A global
 * function: the verifier checks it once and its callers see an unknown index,
 * instead of following each lane as its own path (which multiplied the states
 * of the batch path's bpf_loop past the verifier's limit). */
__noinline int claim_lane(void)
{
	__u32 zero = 0;
	struct cp_lanes *l = bpf_map_lookup_elem(&lanes, &zero);
	if (!l)
		return -1;
	for (int i = 0; i < CP_LANES; i++)
		if (__sync_val_compare_and_swap(&l->busy[i], 0, 1) == 0)
			return i;
	return -1;
}

/* Frees lane `lane` of this CPU (claimed by this program: migration is disabled).
 * An atomic store: the compiler keeps every write to the lane's state before it. */
__noinline int release_lane(int lane)
{
	__u32 zero = 0;
	__u64 i = (__u32)lane;
	/* One register for the bound check and the index, which the verifier wants
	 * (left to itself, the compiler checks a copy). */
	asm volatile("" : "+r"(i));
	struct cp_lanes *l = bpf_map_lookup_elem(&lanes, &zero);
	if (l && i < CP_LANES)
		__sync_fetch_and_and(&l->busy[i], 0);
	return 0;
}

/* Set by the recorder when it installs the first handler: until then every event
 * takes the plain path, without a map lookup. */
__u32 handlers_in_use = 0;

struct ev_ctx {
	__u64 ts;
	__u64 channel;
	__u64 tuple;
	__u32 cpu, tgid, tid, timebase; /* timebase: 0 CLOCK_MONOTONIC ns (Java batches), 1 TSC */
	int lane;			/* the lane a batch holds; -1: a single event, which claims its own */
	__u32 pad;			/* no padding: a global function reads the whole struct */
};

static __always_inline const struct cp_handler *find_handler(__u64 channel)
{
	struct cp_handler *h = bpf_map_lookup_elem(&handlers, &channel);
	if (!h) {
		__u64 dflt = 0;
		h = bpf_map_lookup_elem(&handlers, &dflt);
	}
	return h;
}

/* Lookup, or create (zeroed) and lookup: two CPUs creating at once both end up
 * with the one element that won. */
static __always_inline void *state_of(void *map, void *k)
{
	void *v = bpf_map_lookup_elem(map, k);
	if (v)
		return v;
	struct cp_last_slot zero = {}; /* the largest state value */
	bpf_map_update_elem(map, k, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, k);
}

/* The event's place in the handler's global order (0 = first), or -1 when the
 * state map is full. */
static __always_inline __s64 next_seq(struct cp_hstate_key *k)
{
	struct cp_hstate *s = state_of(&hstate, k);
	if (!s)
		return -1;
	return __sync_fetch_and_add(&s->seq, 1);
}

/* A count record: `n` events of period `bucket` (in `timebase`). */
static __always_inline void emit_count(const struct ev_ctx *e, __u64 bucket, __u32 timebase, __u64 period,
				       __u64 n)
{
	void *rb = cp_ring_of_cpu(&rings, e->cpu);
	struct cp_count_rec *r = rb ? bpf_ringbuf_reserve(rb, sizeof(*r), 0) : NULL;
	if (!r) {
		count(CP_CNT_SERIES_LOST, n);
		return;
	}
	fill_hdr(&r->h, CP_REC_COUNT, e->cpu, e->tgid, e->tid, timebase);
	r->start = bucket * period;
	r->channel = e->channel;
	r->count = n;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

/* The event counted in lane `lane`'s slot, which the caller holds. */
static __always_inline void count_in_lane(const struct ev_ctx *e, const struct cp_handler_rule *h,
					  struct cp_slot_key *k, __u64 b)
{
	struct cp_count_slot *slot = state_of(&count_slots, k);
	if (!slot) {
		count(CP_CNT_SERIES_LOST, 1);
		return;
	}
	if (slot->count && (slot->bucket != b || slot->timebase != e->timebase)) {
		/* A period ended on this CPU: its count goes out now. */
		emit_count(e, slot->bucket, slot->timebase, slot->period, slot->count);
		slot->count = 0;
	}
	slot->bucket = b;
	slot->timebase = e->timebase;
	slot->period = e->timebase ? h->p2 : h->p1;
	slot->count++;
}

/* Global functions (verified once, on their own) with their lane logic: inlined
 * into the batch path's bpf_loop callback, their branches multiplied its states
 * past the verifier's limit. */
__noinline int count_event(const struct ev_ctx *e, const struct cp_handler_rule *h)
{
	if (!e || !h)
		return 0;
	__u64 period = e->timebase ? h->p2 : h->p1;
	if (!period)
		return 0;
	__u64 b = e->ts / period;
	int lane = e->lane >= 0 ? e->lane : claim_lane();
	if (lane < 0) {
		/* Every lane busy: this event's own record of one (exact, only larger). */
		emit_count(e, b, e->timebase, period, 1);
		return 0;
	}
	struct cp_slot_key k = {.channel = e->channel, .gen = h->gen, .lane = lane};
	count_in_lane(e, h, &k, b);
	if (e->lane < 0)
		release_lane(lane);
	return 0;
}

/* Lane `k->lane`'s slot, held by the caller, keeps the event if it is the later
 * one in the handler's order: a thread that took its seq before being preempted
 * may come to the slot after the preempting one wrote a higher seq. */
static __always_inline void hold_in_lane(const struct ev_ctx *e, struct cp_slot_key *k, __u64 seq)
{
	struct cp_last_slot *slot = state_of(&last_slots, k);
	if (!slot) {
		count(CP_CNT_SERIES_LOST, 1); /* state map full: the event stays filtered */
		return;
	}
	if (slot->seq > seq)
		return; /* a later event is held already */
	slot->seq = seq + 1;
	slot->ts = e->ts;
	slot->tuple = e->tuple;
	slot->pid = e->tgid;
	slot->tid = e->tid;
	slot->cpu = e->cpu;
	slot->timebase = e->timebase;
}

__noinline int hold_last(const struct ev_ctx *e, const struct cp_handler_rule *h, __u64 seq)
{
	if (!e || !h)
		return 0;
	int lane = e->lane >= 0 ? e->lane : claim_lane();
	if (lane < 0) {
		count(CP_CNT_SERIES_LOST, 1); /* every lane busy: not held */
		return 0;
	}
	struct cp_slot_key k = {.channel = e->channel, .gen = h->gen, .lane = lane};
	hold_in_lane(e, &k, seq);
	if (e->lane < 0)
		release_lane(lane);
	return 0;
}

/* 1: record the event; 0: the handler keeps no per-event record of it. */
static __always_inline int apply_rule(const struct ev_ctx *e, const struct cp_handler_rule *h)
{
	struct cp_hstate_key k = {.channel = e->channel, .gen = h->gen};
	__s64 seq;
	switch (h->kind) {
	case CP_H_ID:
		return 1;
	case CP_H_DOWNSAMPLE:
		seq = next_seq(&k);
		return seq >= 0 && h->p1 && (__u64)seq % h->p1 == 0;
	case CP_H_XOY:
		return h->p2 && e->tuple % h->p2 < h->p1;
	case CP_H_FIRSTLAST:
		seq = next_seq(&k);
		if (seq == 0)
			return 1;
		if (seq > 0)
			hold_last(e, h, seq);
		return 0;
	case CP_H_COUNTER:
		count_event(e, h);
		return 0;
	default: /* CP_H_NULL */
		return 0;
	}
}

static __always_inline int keep_event(const struct ev_ctx *e)
{
	if (!handlers_in_use)
		return 1;
	const struct cp_handler *hv = find_handler(e->channel);
	if (!hv)
		return 1;
	/* Stamped before the install: the previous rule (see struct cp_handler). */
	return apply_rule(e, (e->timebase && e->ts < hv->since_tsc) ? &hv->prev : &hv->cur);
}

/* One event record (cp_logTS, cp_channel_closed), `tsc` the site's stamp.
 * Handlers apply to user events (CP_REC_EVENT) only: a channel close is always
 * recorded. */
static __always_inline int record_event(__u16 kind, __u64 tsc, __u64 channel, __u64 tuple, const int staged)
{
	__u32 cpu, tgid, tid;
	void *rb = my_ring(&cpu, &tgid, &tid);
	if (!rb)
		return 0;
	count(CP_CNT_SEEN, 1);
	if (kind == CP_REC_EVENT) {
		struct ev_ctx e = {.ts = tsc,
				   .channel = channel,
				   .tuple = tuple,
				   .cpu = cpu,
				   .tgid = tgid,
				   .tid = tid,
				   .timebase = 1,
				   .lane = -1,
				   .pad = 0};
		if (!keep_event(&e)) {
			count(CP_CNT_FILTERED, 1);
			return 0;
		}
		if (staged) {
			stage_event(rb, tsc, channel, tuple, cpu, tgid, tid);
			return 0;
		}
	} else {
		flush_stage(rb, cpu, tgid, tid, staged);
	}
	struct cp_event_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count(CP_CNT_DROPPED, 1);
		return 0;
	}
	fill_hdr(&r->h, kind, cpu, tgid, tid, 0);
	r->tsc = tsc;
	r->channel = channel;
	r->tuple = tuple;
	bpf_ringbuf_submit(r, wake_flag(rb));
	return 0;
}

/* Batch filtering, one bpf_loop() step per entry: compacts the kept entries to
 * the front of the scratch array. */
struct batch_ctx {
	struct batch_scratch *s;
	__u32 n, kept, cpu, tgid, tid;
	__u8 timebase; /* 1: TSC entries (cp_batch_submit), 0: CLOCK_MONOTONIC (Java) */
	/* The rule of the previous entry's channel: a hot loop logs runs of one
	 * channel, which then cost one map lookup per batch instead of per entry. */
	__u32 cached;
	__u64 cached_channel;
	struct cp_handler_rule rule;
	__s64 lane; /* held for the whole batch: its scratch and handler state */
};

static long filter_entry(__u32 i, void *arg)
{
	struct batch_ctx *c = arg;
	if (i >= c->n)
		return 1;
	i &= CP_BATCH_MAX - 1; /* n <= CP_BATCH_MAX: a no-op that bounds i for the verifier */
	struct cp_batch_entry *src = &c->s->e[i];
	struct ev_ctx e = {.ts = src->tsc,
			   .channel = src->channel,
			   .tuple = src->tuple,
			   .cpu = c->cpu,
			   .tgid = c->tgid,
			   .tid = c->tid,
			   .timebase = c->timebase,
			   .lane = c->lane,
			   .pad = 0};
	if (!c->cached || c->cached_channel != e.channel) {
		const struct cp_handler *hv = find_handler(e.channel);
		if (hv) {
			c->rule = hv->cur; /* batch entries: the rule in force at hand-over */
		} else {
			c->rule.kind = CP_H_ID;
			c->rule.gen = 0;
		}
		c->cached_channel = e.channel;
		c->cached = 1;
	}
	if (apply_rule(&e, &c->rule)) {
		__u32 k = c->kept & (CP_BATCH_MAX - 1); /* kept <= i < CP_BATCH_MAX */
		if (k != i)
			c->s->e[k] = *src;
		c->kept++;
	}
	return 0;
}

/* Copies the batch into the scratch `s` of lane `lane` (held), filters it there,
 * then reserves ring space only if anything is kept (a fully filtered batch
 * costs none). */
static __always_inline void filter_and_submit(void *rb, struct batch_scratch *s, int lane,
					      const struct cp_batch_entry *entries, __u32 n, __u64 now,
					      __u32 cpu, __u32 tgid, __u32 tid, __u16 kind, __u32 hdr_cpu)
{
	/* 64 bits, and opaque to the compiler: it keeps the bound below (which it
	 * could prove) on the register the copy then uses, for the verifier. */
	__u64 bytes = (__u64)n * sizeof(struct cp_batch_entry);
	barrier_var(bytes);
	if (bytes > sizeof(s->e))
		bytes = sizeof(s->e); /* unreachable; bounds the size for the verifier */
	if (bpf_probe_read_user(s->e, bytes, entries)) {
		count(CP_CNT_READ_FAIL, 1);
		count(CP_CNT_DROPPED, n);
		return;
	}
	struct batch_ctx c = {.s = s,
			      .lane = lane,
			      .n = n,
			      .kept = 0,
			      .cpu = cpu,
			      .tgid = tgid,
			      .tid = tid,
			      .cached = 0,
			      .timebase = kind != CP_REC_BATCH_MONO};
	bpf_loop(CP_BATCH_MAX, filter_entry, &c, 0);
	__u32 kept = c.kept;
	if (kept > n)
		kept = n; /* unreachable */
	count(CP_CNT_FILTERED, n - kept);
	if (kept == 0)
		return;
	struct cp_batch_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count(CP_CNT_DROPPED, kept);
		return;
	}
	/* The whole scratch, a constant size: the verifier of 6.1 loses the bound
	 * of `kept` across bpf_loop. Entries past `kept` are not read (h.n). */
	bpf_probe_read_kernel(r->e, sizeof(r->e), s->e);
	fill_hdr(&r->h, kind, hdr_cpu, tgid, tid, kept);
	r->ktime_ns = now;
	bpf_ringbuf_submit(r, wake_flag(rb));
}

/* With handlers: filtered in a scratch of a lane of this CPU, which the batch
 * holds throughout (a thread preempting this one on the CPU takes another). */
static __always_inline int submit_filtered(void *rb, const struct cp_batch_entry *entries, __u32 n, __u64 now,
					   __u32 cpu, __u32 tgid, __u32 tid, __u16 kind, __u32 hdr_cpu)
{
	int lane = claim_lane();
	if (lane < 0) {
		count(CP_CNT_DROPPED, n); /* every lane busy (CP_LANES) */
		return 0;
	}
	__u32 key = lane;
	struct batch_scratch *s = bpf_map_lookup_elem(&scratch, &key);
	if (s)
		filter_and_submit(rb, s, lane, entries, n, now, cpu, tgid, tid, kind, hdr_cpu);
	release_lane(lane);
	return 0;
}

/* A batch of n entries at `entries` (user memory of the current process):
 * filtered, copied into this CPU's ring, counted. `stamp`: 1 + the CPU whose
 * TSC stamped every entry, 0 if not known (include/cptrace_records.h); the
 * record then names that CPU, not this one. */
static __always_inline int emit_batch(const struct cp_batch_entry *entries, __u32 n, __u16 kind, __u64 now,
				      __u32 owner, __u32 stamp, const int staged)
{
	__u32 cpu, tgid, tid;
	void *rb = my_ring(&cpu, &tgid, &tid);
	if (!rb || n == 0)
		return 0;
	__u32 hdr_cpu = cpu;
	if (stamp && stamp <= CP_STAMP_CPU_MAX && kind == CP_REC_BATCH) {
		kind = CP_REC_BATCH_CPU;
		hdr_cpu = stamp - 1;
	}
	if (n > CP_BATCH_MAX) { /* not our library's call: count, keep nothing */
		count(CP_CNT_SEEN, 1);
		count(CP_CNT_READ_FAIL, 1);
		count(CP_CNT_DROPPED, 1);
		return 0;
	}
	count(CP_CNT_SEEN, n);
	flush_stage(rb, cpu, tgid, tid, staged);
	if (owner)
		tid = owner; /* entries logged by another thread of ours (the flusher's hand-over) */
	if (handlers_in_use && have_bpf_loop) /* the recorder refuses handlers without bpf_loop */
		return submit_filtered(rb, entries, n, now, cpu, tgid, tid, kind, hdr_cpu);
	/* The verifier wants a constant reservation size: always reserve a full batch. */
	struct cp_batch_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count(CP_CNT_DROPPED, n);
		return 0;
	}
	/* 64 bits, and opaque to the compiler: it keeps the bound below (which it
	 * could prove) on the register the copy then uses, for the verifier. */
	__u64 bytes = (__u64)n * sizeof(struct cp_batch_entry);
	barrier_var(bytes);
	if (bytes > sizeof(r->e))
		bytes = sizeof(r->e); /* unreachable; bounds the size for the verifier */
	if (bpf_probe_read_user(r->e, bytes, entries)) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		count(CP_CNT_READ_FAIL, 1);
		count(CP_CNT_DROPPED, n);
		return 0;
	}
	fill_hdr(&r->h, kind, hdr_cpu, tgid, tid, n);
	r->ktime_ns = now;
	bpf_ringbuf_submit(r, wake_flag(rb));
	return 0;
}

/* ---- Thread buffers left behind at exit -------------------------------------
 * The library names each thread's buffer at cp_batch_submit (third argument:
 * where its entry count lives). When a thread ends with entries still in it
 * (threads running at exit(), _exit, any signal, SIGKILL), they are handed over
 * from the dying thread while its memory is still there:
 *  - at the entry of exit and exit_group, and when a fatal signal is delivered
 *    (SIGKILL of the other threads of an exiting group included): on every
 *    kernel, through classic tracepoints;
 *  - at sched_process_exit where the kernel runs it before exit_mm (6.16+, whose
 *    prototype also has group_dead): this also catches the rarer ends
 *    (seccomp kill, oops). Before 6.16 it runs after exit_mm and could read
 *    nothing, so the loader does not load it there.
 * The first hook to see a thread's buffer hands it over and forgets it. */
struct tbuf_ref {
	__u64 entries; /* user address of the entries */
	__u64 count;   /* user address of the __u32 entry count */
	__u16 kind;    /* CP_REC_BATCH or CP_REC_BATCH_MONO */
	/* The last hand-over: a thread killed after it but before the library
	 * reset the count leaves the same n and first timestamp behind, which the
	 * exit path must not hand over twice. */
	__u32 last_n;
	__u64 last_ts0;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CP_TBUF_MAX);
	__type(key, __u32); /* tid */
	__type(value, struct tbuf_ref);
} tbufs SEC(".maps");

/* Entries address -> tid, to forget a buffer by its address (a Java Batch's
 * buffer is given back from another thread than the one that used it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CP_TBUF_MAX);
	__type(key, __u64);
	__type(value, __u32);
} tbuf_owner SEC(".maps");

static __always_inline void forget_tbuf(__u64 entries)
{
	__u32 *tid = bpf_map_lookup_elem(&tbuf_owner, &entries);
	if (!tid)
		return;
	__u32 t = *tid;
	struct tbuf_ref *ref = bpf_map_lookup_elem(&tbufs, &t);
	if (ref && ref->entries == entries)
		bpf_map_delete_elem(&tbufs, &t);
	bpf_map_delete_elem(&tbuf_owner, &entries);
}

/* Once per batch: a lookup, and a write only when the buffer is new. */
static __always_inline void remember_tbuf(const struct cp_batch_entry *entries, __u32 n,
					  const __u32 *count_at, __u16 kind)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (!count_at) {
		if (n == 0)
			forget_tbuf((__u64)entries); /* about to be freed or reused */
		return;
	}
	__u64 ts0 = 0;
	if (n)
		bpf_probe_read_user(&ts0, sizeof(ts0), entries);
	struct tbuf_ref *old = bpf_map_lookup_elem(&tbufs, &tid);
	if (old && old->entries == (__u64)entries && old->count == (__u64)count_at && old->kind == kind) {
		old->last_n = n;
		old->last_ts0 = ts0;
		return;
	}
	if (old)
		bpf_map_delete_elem(&tbuf_owner, &old->entries); /* the thread's previous buffer */
	struct tbuf_ref ref = {.entries = (__u64)entries,
			       .count = (__u64)count_at,
			       .kind = kind,
			       .last_n = n,
			       .last_ts0 = ts0};
	__u64 key = (__u64)entries;
	if (bpf_map_update_elem(&tbufs, &tid, &ref, BPF_ANY) ||
	    bpf_map_update_elem(&tbuf_owner, &key, &tid, BPF_ANY))
		count(CP_CNT_EXIT_UNTRACKED, 1);
}

static __always_inline int batch_submit(struct pt_regs *ctx, const struct cp_batch_entry *entries, __u32 n,
					const __u32 *count_at, const int staged)
{
	__u64 now = bpf_ktime_get_ns();
	/* The same program serves cp_batch_submit_mono (Java); the cookie says so. */
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u16 kind = cookie == CP_COOKIE_BATCH_MONO ? CP_REC_BATCH_MONO : CP_REC_BATCH;
	/* cp_batch_submit_for's fourth argument: the tid that logged the entries. */
	__u32 owner = cookie == CP_COOKIE_BATCH_FOR ? (__u32)PT_REGS_PARM4(ctx) : 0;
	if (filter_tgid && (bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	__u32 stamp = n >> CP_BATCH_CPU_SHIFT;
	n &= CP_BATCH_COUNT_MASK;
	if (stamp > CP_STAMP_CPU_MAX)
		n = CP_BATCH_MAX + 1; /* not our library's call: emit_batch refuses it */
	remember_tbuf(entries, n, count_at, kind);
	return emit_batch(entries, n, kind, now, owner, stamp, staged);
}

/* Hands over what the ending thread `tid` left in its buffer. */
static __always_inline int hand_over_tbuf(__u32 tid, const int staged)
{
	struct tbuf_ref *ref = bpf_map_lookup_elem(&tbufs, &tid);
	if (!ref)
		return 0;
	struct tbuf_ref r = *ref;
	bpf_map_delete_elem(&tbufs, &tid);
	bpf_map_delete_elem(&tbuf_owner, &r.entries);
	__u32 n = 0;
	__u64 ts0 = 0;
	if (bpf_probe_read_user(&n, sizeof(n), (const void *)r.count) ||
	    bpf_probe_read_user(&ts0, sizeof(ts0), (const void *)r.entries)) {
		count(CP_CNT_EXIT_UNREADABLE, 1); /* how many events: unknown */
		return 0;
	}
	if (n == 0 || (n == r.last_n && ts0 == r.last_ts0))
		return 0; /* empty, or handed over already */
	return emit_batch((const struct cp_batch_entry *)r.entries, n, r.kind, bpf_ktime_get_ns(), 0, 0,
			  staged);
}

static __always_inline int hand_over_current(const int staged)
{
	return hand_over_tbuf((__u32)bpf_get_current_pid_tgid(), staged);
}

/* The classic tracepoint's fields (tracefs events/signal/signal_deliver/format,
 * stable since 2.6.3x). */
struct signal_deliver_args {
	__u64 common;
	int sig;
	int errno_;
	int code;
	unsigned long sa_handler;
	unsigned long sa_flags;
};

#define CP_SIGNAL_UNKILLABLE 0x40 /* include/linux/sched/signal.h: a namespace's init */

/* Will the delivery of `sig` (handler `h`) end the thread? Default action of
 * terminate or dump core, not ignored, and not to an unkillable namespace init
 * (which the kernel spares after this tracepoint, except for SIGKILL). */
static __always_inline int fatal_delivery(int sig, unsigned long h)
{
	if (sig == 9) /* SIGKILL */
		return 1;
	if (h != 0) /* SIG_IGN or a handler */
		return 0;
	switch (sig) {
	case 17:
	case 18:
	case 19:
	case 20:
	case 21:
	case 22:
	case 23:
	case 28:
		return 0; /* CHLD CONT STOP TSTP TTIN TTOU URG WINCH: ignore or stop */
	}
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	return !(BPF_CORE_READ(t, signal, flags) & CP_SIGNAL_UNKILLABLE);
}

/* Channel names: rare, so they are not counted as events. A lost one is still
 * recovered from the process registry when the recording stops. */
static __always_inline int channel_announce(__u64 channel, const char *name, const int staged)
{
	__u32 cpu, tgid, tid;
	void *rb = my_ring(&cpu, &tgid, &tid);
	if (!rb)
		return 0;
	flush_stage(rb, cpu, tgid, tid, staged);
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

/* ---- The programs that touch the per-CPU stage, in two variants -------------
 * Staged (the names the loader knows) and unstaged (suffix _u), for kernels
 * without bpf_preempt_disable (before 6.10): with `staged` a constant 0 the
 * compiler leaves no kfunc call in them at all, which 5.15's verifier needs
 * (before 5.18 it refuses a call to an unresolved kfunc even in dead code).
 * The loader loads one variant (user/probe/probe_attach.cpp). */
/* PT_REGS_RC (rax) at a site's nop5 is the TSC its stamp read at the call. */
#define CP_SITE_TSC(ctx) ((__u64)PT_REGS_RC(ctx))
#define CP_STAGE_VARIANT(sfx, staged)                                                                        \
	SEC("uprobe")                                                                                        \
	int BPF_KPROBE(cp_logTS##sfx, __u64 channel, __u64 tuple)                                            \
	{                                                                                                    \
		return record_event(CP_REC_EVENT, CP_SITE_TSC(ctx), channel, tuple, staged);                 \
	}                                                                                                    \
	/* cp.Cloudprofiler.logTS from Java: the JNI entry point in libcptrace_jni.so is  \
	 * a probe site called as (JNIEnv *, jclass, jlong channel, jlong tuple). */                  \
	SEC("uprobe")                                                                                        \
	int BPF_KPROBE(cp_jni_logTS##sfx, void *env, void *cls, __u64 channel, __u64 tuple)                  \
	{                                                                                                    \
		return record_event(CP_REC_EVENT, CP_SITE_TSC(ctx), channel, tuple, staged);                 \
	}                                                                                                    \
	SEC("uprobe")                                                                                        \
	int BPF_KPROBE(cp_batch_submit##sfx, const struct cp_batch_entry *entries, __u32 n,                  \
		       const __u32 *count_at)                                                                \
	{                                                                                                    \
		return batch_submit(ctx, entries, n, count_at, staged);                                      \
	}                                                                                                    \
	SEC("uprobe")                                                                                        \
	int BPF_KPROBE(cp_channel_announce##sfx, __u64 channel, const char *name)                            \
	{                                                                                                    \
		return channel_announce(channel, name, staged);                                              \
	}                                                                                                    \
	SEC("uprobe")                                                                                        \
	int BPF_KPROBE(cp_channel_closed##sfx, __u64 channel)                                                \
	{                                                                                                    \
		return record_event(CP_REC_CLOSE, CP_SITE_TSC(ctx), channel, 0, staged);                     \
	}                                                                                                    \
	/* One argument: the prototype every kernel has (6.16 added group_dead). */                          \
	SEC("tp_btf/sched_process_exit")                                                                     \
	int BPF_PROG(cp_tbuf_exit##sfx, struct task_struct *task)                                            \
	{                                                                                                    \
		return hand_over_tbuf(task->pid, staged);                                                    \
	}                                                                                                    \
	SEC("tp/syscalls/sys_enter_exit")                                                                    \
	int cp_tbuf_exit_sys##sfx(void *ctx)                                                                 \
	{                                                                                                    \
		return hand_over_current(staged);                                                            \
	}                                                                                                    \
	SEC("tp/syscalls/sys_enter_exit_group")                                                              \
	int cp_tbuf_exit_group##sfx(void *ctx)                                                               \
	{                                                                                                    \
		return hand_over_current(staged);                                                            \
	}                                                                                                    \
	SEC("tp/signal/signal_deliver")                                                                      \
	int cp_tbuf_exit_sig##sfx(struct signal_deliver_args *a)                                             \
	{                                                                                                    \
		if (!fatal_delivery(a->sig, a->sa_handler))                                                  \
			return 0;                                                                            \
		return hand_over_current(staged);                                                            \
	}

CP_STAGE_VARIANT(, 1)
CP_STAGE_VARIANT(_u, 0)

/* ---- Following the process tree -------------------------------------------
 * A process forked by a followed process is followed too, from the fork on:
 * the recorder, told through proc_events, attaches the uprobes to its pid
 * (the child waits for that: lib/follow_wait.c). Threads share their process's
 * uprobes and are not reported. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CP_FOLLOW_MAX);
	__type(key, __u32);
	__type(value, __u8);
} followed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} proc_events SEC(".maps");

static __always_inline void report_proc(__u32 kind, __u32 tgid, __u32 parent)
{
	struct cp_proc_rec *r = bpf_ringbuf_reserve(&proc_events, sizeof(*r), 0);
	if (!r) {
		cp_count_atomic(&counters, CP_CNT_FOLLOW_LOST, 1); /* not a uprobe: may interrupt one */
		return;
	}
	r->kind = kind;
	r->tgid = tgid;
	r->parent = parent;
	r->pad = 0;
	r->hello = 0;
	r->site = 0;
	r->ktime_ns = 0;
	bpf_ringbuf_submit(r, 0);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(cp_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	if (ctgid == ptgid || !bpf_map_lookup_elem(&followed, &ptgid))
		return 0;
	__u8 one = 1;
	if (bpf_map_update_elem(&followed, &ctgid, &one, BPF_ANY)) {
		cp_count_atomic(&counters, CP_CNT_FOLLOW_LOST, 1);
		return 0;
	}
	report_proc(CP_PROC_FORK, ctgid, ptgid);
	return 0;
}

/* One argument, as every kernel has it: the group is dead once its live count
 * is zero (decremented before this tracepoint). Two last threads may both see
 * zero; the one that deletes the pid reports it. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(cp_follow_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	if (BPF_CORE_READ(p, signal, live.counter) != 0 || bpf_map_delete_elem(&followed, &tgid))
		return 0;
	report_proc(CP_PROC_EXIT, tgid, 0);
	return 0;
}

/* ---- The hello (include/cptrace_records.h, lib/recorder_hello.c) -----------
 * A process that loads libcptrace calls prctl(PR_GET_DUMPABLE, CP_HELLO_PRCTL,
 * &hello) (an older library: prctl(CP_HELLO_PRCTL, &hello)) with
 * CP_HELLO_SIGNAL blocked. If this recorder must record it (record --all:
 * every process; else a followed one), that thread gets CP_HELLO_SIGNAL before
 * the call returns: it then waits until the recorder, told here where its
 * library is, has attached and written CP_HELLO_ATTACHED into it. A signal, as
 * it is the one answer a BPF program can give a system call here: no
 * bpf_probe_write_user under lockdown, no override_return without kprobes, no
 * BPF LSM programs. A hello the recorder cannot be told of (full ring) gets no
 * signal: the process goes on at once, and the hello is counted
 * (CP_CNT_FOLLOW_LOST). */
const volatile __u8 hello_all = 0;

SEC("tp/syscalls/sys_enter_prctl")
int cp_hello(struct trace_event_raw_sys_enter *ctx)
{
	/* Each argument read at its own constant offset: the verifier refuses a
	 * context read at a computed one. */
	__u64 option = ctx->args[0], arg2 = ctx->args[1], arg3 = ctx->args[2], at;
	barrier_var(arg3);
	if (option == CP_HELLO_CARRIER && arg2 == CP_HELLO_PRCTL)
		at = arg3;
	else if (option == CP_HELLO_PRCTL)
		at = arg2;
	else
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!hello_all && !bpf_map_lookup_elem(&followed, &tgid))
		return 0;
	struct cp_hello h;
	if (bpf_probe_read_user(&h, sizeof(h), (void *)at) || h.magic != CP_HELLO_MAGIC ||
	    h.version != CP_HELLO_VERSION)
		return 0;
	struct cp_proc_rec *r = bpf_ringbuf_reserve(&proc_events, sizeof(*r), 0);
	if (!r) {
		cp_count_atomic(&counters, CP_CNT_FOLLOW_LOST, 1);
		return 0;
	}
	if (bpf_send_signal_thread(CP_HELLO_SIGNAL)) {
		bpf_ringbuf_discard(r, 0);
		return 0;
	}
	r->kind = CP_PROC_HELLO;
	r->tgid = tgid;
	r->parent = 0;
	r->pad = 0;
	r->hello = at;
	r->site = h.site;
	r->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* The recorder's own program (user/collect/stage_flush.cpp), run by its drain
 * thread with BPF_PROG_TEST_RUN on each CPU in turn at every flush: that CPU's
 * staged events go to its ring. Attached to nothing: no other process runs it. */
SEC("raw_tp")
int cp_stage_flush(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 cpu = bpf_get_smp_processor_id();
	flush_stage(cp_ring_of_cpu(&rings, cpu), cpu, id >> 32, (__u32)id, 1);
	return 0;
}

/* Does nothing: the baseline "empty optimized uprobe" that `cptrace check` and the
 * benchmarks measure cp_logTS against. */
SEC("uprobe")
int cp_empty(void *ctx)
{
	return 0;
}
