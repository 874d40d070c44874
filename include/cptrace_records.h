/* Record layouts shared by the BPF programs (bpf/) and the collector (user/).
 *
 * These are the records that cross the kernel/user boundary through the per-CPU
 * ring buffers. They are defined once, here. Everything after the collector uses
 * the decoded trace_event of user/trace/trace_format.h instead.
 *
 * The header is included by BPF C (where vmlinux.h provides __u64 and friends)
 * and by C/C++ user code (where linux/types.h does). */
#ifndef CPTRACE_RECORDS_H
#define CPTRACE_RECORDS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Maximum entries handed over by one cp_batch_submit() call. The BPF program
 * reserves a fixed-size ring record of this many entries (the verifier wants a
 * constant reservation size) and copies only n of them. */
#define CP_BATCH_MAX 256
#define CP_CHANNEL_NAME_MAX 64

enum cp_rec_kind {
	CP_REC_EVENT = 1,      /* one cp_logTS() call, stamped with the TSC at the call */
	CP_REC_BATCH = 2,      /* n user-timestamped (TSC) events from cp_batch_submit() */
	CP_REC_CHANNEL = 3,    /* a channel id -> name announcement from cp_open_channel() */
	CP_REC_CLOSE = 4,      /* cp_close_channel(), stamped with the TSC at the call */
	CP_REC_BATCH_MONO = 5, /* as CP_REC_BATCH, entries stamped CLOCK_MONOTONIC ns
	                        * (Java's System.nanoTime(), cp_batch_submit_mono) */
	CP_REC_COUNT = 6,      /* `counter` handler: events of one channel in one period, on one CPU */
	CP_REC_SINGLES = 7,    /* n cp_logTS() calls staged on one CPU (struct cp_singles_rec) */
	CP_REC_BATCH_CPU = 8,  /* as CP_REC_BATCH, every entry stamped on the TSC of CPU h.cpu
	                        * (rdtscp), not of the CPU the probe fired on */
};

/* Every ring record starts with this header. */
struct cp_rec_hdr {
	__u16 kind; /* enum cp_rec_kind */
	__u16 cpu;  /* CPU the probe fired on */
	__u32 pid;  /* tgid */
	__u32 tid;  /* kernel thread id */
	__u32 n;    /* by kind: CP_REC_BATCH, CP_REC_BATCH_MONO and CP_REC_SINGLES:
	              * the number of valid entries; CP_REC_COUNT: the timebase of
	              * its stamps (1 TSC, 0 CLOCK_MONOTONIC ns); else 0 */
};

struct cp_event_rec { /* CP_REC_EVENT and CP_REC_CLOSE */
	struct cp_rec_hdr h;
	__u64 tsc; /* the site's stamp: rdtsc at the call, before the probe
	                     * (lib/probe_site.h), handed to the program in rax */
	__u64 channel;
	__u64 tuple;
};

/* One entry of a user-space batch, exactly as the application library lays it
 * out in its thread-local buffer (the BPF program copies it verbatim). */
struct cp_batch_entry {
	__u64 tsc; /* rdtsc() at the cp_logTS_batch() call; System.nanoTime()
	                     * from Java (cp_batch_submit_mono, CP_REC_BATCH_MONO) */
	__u64 channel;
	__u64 tuple;
};

/* cp_batch_submit's `n`: the entry count in the low 16 bits and, above them,
 * 1 + the CPU whose TSC stamped every entry (rdtscp's TSC_AUX), or 0 where
 * that is not known (a library without rdtscp, an older library). Two stamps
 * of one CPU's TSC differ by no cross-CPU skew. */
#define CP_BATCH_COUNT_MASK 0xffffu
#define CP_BATCH_CPU_SHIFT 16
#define CP_STAMP_CPU_MAX 4096 /* TSC_AUX keeps the CPU in 12 bits (Linux) */

/* Attach cookie of the batch program: which timebase the entries carry. */
#define CP_COOKIE_BATCH_TSC 0
#define CP_COOKIE_BATCH_MONO 1
/* cp_batch_submit_for: a thread's buffer handed over by the library's flusher
 * thread (lib/buffer_flusher.c); a fourth argument names the owner's tid. */
#define CP_COOKIE_BATCH_FOR 2

struct cp_batch_rec { /* CP_REC_BATCH, CP_REC_BATCH_MONO and CP_REC_BATCH_CPU */
	struct cp_rec_hdr h;
	__u64 ktime_ns; /* when the batch was handed over */
	struct cp_batch_entry e[CP_BATCH_MAX];
};

/* ---- Staged single events ---------------------------------------------------
 * cp_logTS() events are not reserved in the ring one by one: a reservation and
 * its commit cost more than the rest of the program (a lock, an atomic, a cache
 * line of the ring each time). Each CPU stages them in a small per-CPU array
 * (the BPF map `stages`, value struct cp_stage) and hands CP_STAGE_MAX at a time
 * to its ring as one CP_REC_SINGLES record. Before any other record goes into
 * the CPU's ring from a probe, the stage is handed over first, so a CPU's ring
 * keeps the order in which its events happened. The recorder empties every
 * CPU's stage at each flush (a probe of its own, run on each CPU) and reads what
 * is left from the map after the probes are detached. */
#define CP_STAGE_MAX 32

struct cp_single_entry {
	__u64 tsc; /* the site's stamp (as cp_event_rec.tsc) */
	__u64 channel;
	__u64 tuple;
	__u32 pid; /* tgid */
	__u32 tid;
};

struct cp_stage { /* value of the per-CPU map `stages` */
	__u32 n;
	__u32 pad;
	struct cp_single_entry e[CP_STAGE_MAX];
};

struct cp_singles_rec { /* CP_REC_SINGLES; h.n entries valid, h.pid/h.tid: who handed them over */
	struct cp_rec_hdr h;
	struct cp_single_entry e[CP_STAGE_MAX];
};

struct cp_channel_rec {
	struct cp_rec_hdr h;
	__u64 ktime_ns;
	__u64 channel;
	char name[CP_CHANNEL_NAME_MAX];
};

/* ---- Following a process tree (record -p / -- CMD, bpf/cptrace.bpf.c) ----------
 * The `proc_events` ring tells the recorder that a followed process forked a
 * new process (it then attaches to the child's pid) or that one ended. */
#define CP_FOLLOW_MAX 65536 /* processes followed at once */
#define CP_TBUF_MAX 262144  /* thread buffers tracked for their thread's exit */

enum cp_proc_kind {
	CP_PROC_FORK = 1,
	CP_PROC_EXIT = 2,
	CP_PROC_HELLO = 3, /* a process in scope loaded libcptrace (below) and waits */
};

struct cp_proc_rec {
	__u32 kind;   /* enum cp_proc_kind */
	__u32 tgid;   /* the new or ended process (host pid) */
	__u32 parent; /* CP_PROC_FORK: the forking process */
	__u32 pad;
	__u64 hello;	/* CP_PROC_HELLO: address of its struct cp_hello */
	__u64 site;	/* CP_PROC_HELLO: address of a probe site of that library */
	__u64 ktime_ns; /* CP_PROC_HELLO: CLOCK_MONOTONIC of the hello (how long it waited) */
};

/* ---- The hello: a new process meets its recorder, from any namespace -------
 * At load, and in a forked child, libcptrace (lib/recorder_hello.c) calls
 * prctl(PR_GET_DUMPABLE, CP_HELLO_PRCTL, &hello) with CP_HELLO_SIGNAL blocked:
 * an option every kernel knows and that reads no argument (it returns the
 * dumpable flag), so that a seccomp profile which kills a process on prctl
 * options it does not know (some runtimes' do) lets it through. Libraries
 * before that called prctl(CP_HELLO_PRCTL, &hello), an option no kernel knows
 * (EINVAL); a recorder answers both. A recorder that must record this process (record
 * --all: every one; -p/-- CMD: its tree) has a BPF program on that system
 * call's tracepoint which checks the struct, sends CP_HELLO_SIGNAL to the
 * calling thread (it stays pending: blocked) and tells the recorder
 * (CP_PROC_HELLO). The library takes the signal back and waits until the
 * recorder, attached to the library holding `site`, has written
 * CP_HELLO_ATTACHED into `state` (process_vm_writev, host pid); bounded. No
 * recorder: no signal, and the process goes on at once. No file, no pid of any
 * namespace involved. */
#define CP_HELLO_PRCTL 0x43505452u	     /* "CPTR" */
#define CP_HELLO_CARRIER 3u		     /* PR_GET_DUMPABLE */
#define CP_HELLO_MAGIC 0x6f6c6c6548707443ull /* "CtpHello" */
#define CP_HELLO_VERSION 1u
#define CP_HELLO_SIGNAL 23 /* SIGURG: ignored by default, should it ever escape */

enum cp_hello_state {
	CP_HELLO_NONE = 0,     /* set by the process before the call */
	CP_HELLO_ATTACHED = 2, /* written by the recorder: attached, go on */
};

struct cp_hello {
	__u64 magic;   /* CP_HELLO_MAGIC */
	__u64 site;    /* address of one probe site of the library saying hello */
	__u32 version; /* CP_HELLO_VERSION */
	__u32 state;   /* enum cp_hello_state */
};

/* Index of the per-CPU counters in the BPF `counters` percpu array. Counts are
 * in events (a dropped batch of n counts n), so that
 *   recorded + dropped == emitted   holds exactly. */
enum cp_counter {
	CP_CNT_SEEN = 0,	    /* events the probes saw */
	CP_CNT_DROPPED = 1,	    /* events whose ring reservation failed */
	CP_CNT_READ_FAIL = 2,	    /* batch copies that failed (counted as dropped too) */
	CP_CNT_FILTERED = 3,	    /* events a channel handler chose not to record:
	                      * recorded + dropped + filtered == seen */
	CP_CNT_SERIES_LOST = 4,	    /* `counter` events whose CP_REC_COUNT record was lost, and
	                         * `firstlast` events that could not be held as the last one
	                         * (no free lane: CP_LANES) (they are also in FILTERED: this
	                         * says the handler's output misses them) */
	CP_CNT_FOLLOW_LOST = 5,	    /* forks of followed processes the recorder was not told of */
	CP_CNT_EXIT_UNREADABLE = 6, /* thread buffers unreadable when their thread ended
	                             * (their events are lost and could not be counted) */
	CP_CNT_EXIT_UNTRACKED = 7,  /* thread buffers the exit path could not keep track of */
	CP_CNT_MAX = 8,
};

/* ---- Channel handlers (user/probe/handlers.h, evaluated in bpf/cptrace.bpf.c) ----------
 *
 * The `handlers` hash map holds one cp_handler per channel id; key 0 is the
 * default for channels without an entry (no default entry: `id`). Every install
 * gets a fresh generation `gen`, so the handler state below (keyed by channel and
 * generation) starts from zero at the instant the handler takes effect. */
enum cp_handler_kind {
	CP_H_ID = 0,	     /* every event */
	CP_H_DOWNSAMPLE = 1, /* p1 = N: the 1st, N+1-th, 2N+1-th ... event (global order) */
	CP_H_XOY = 2,	     /* p1 = X, p2 = Y: tuple % Y < X */
	CP_H_FIRSTLAST = 3,  /* first and last event of the handler's period */
	CP_H_COUNTER = 4,    /* p1 = period ns (CLOCK_MONOTONIC entries: Java batches),
	                      * p2 = period TSC ticks (cp_logTS and C batches) */
	CP_H_NULL = 5,	     /* nothing */
};

struct cp_handler_rule {
	__u32 kind; /* enum cp_handler_kind */
	__u32 pad;
	__u64 gen; /* install generation, > 0 (0: never installed) */
	__u64 p1;
	__u64 p2;
};

/* A channel's map value: the rule installed at TSC `since_tsc`, and the one
 * before it. A cp_logTS event stamped (at its call) before since_tsc follows
 * `prev` even if its program reads the map after the update, so the switch
 * instant is exact for cp_logTS events: stamped before the recorder's "before"
 * instant -> old rule, after its "after" instant -> new rule. */
struct cp_handler {
	struct cp_handler_rule cur;
	struct cp_handler_rule prev;
	__u64 since_tsc;
};

struct cp_hstate_key {
	__u64 channel;
	__u64 gen;
};

/* Per-CPU handler state (last_slots, count_slots, the batch scratch) comes in
 * CP_LANES lanes per CPU. A program claims a free lane of its CPU with a
 * compare-and-exchange before it touches that state and frees it after: on a
 * preemptible kernel (preempt=full, PREEMPT_RT) a BPF program runs with
 * migration disabled but can be preempted, and a thread preempting it on the same
 * CPU then claims another lane instead of interleaving in the same state. Almost
 * always lane 0 is free; when all are busy the event's handler state is counted
 * lost (CP_CNT_SERIES_LOST; a batch: CP_CNT_DROPPED). */
#define CP_LANES 4

/* Key of the per-CPU handler state: a handler's (channel, gen) and the lane. */
struct cp_slot_key {
	__u64 channel;
	__u64 gen;
	__u32 lane;
	__u32 pad;
};

/* Shared (all CPUs) state of downsample and firstlast: the number of events the
 * handler has seen, taken with an atomic fetch-and-add, so "every N-th" and
 * "first" are exact across CPUs and threads. Created by user space before the
 * handler is installed. */
struct cp_hstate {
	__u64 seq;
};

/* Per-CPU slot of `firstlast`: the latest non-first event this CPU (lane) saw. The
 * recorder keeps, per (channel, gen), the slot with the highest seq and writes it
 * as the "last" event when the recording stops. */
struct cp_last_slot {
	__u64 seq; /* 1 + the event's place in the handler's order; 0 = empty */
	__u64 ts;  /* CLOCK_MONOTONIC ns (timebase 0: Java batches) or TSC (timebase 1) */
	__u64 tuple;
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u32 timebase;
};

/* Per-CPU slot of `counter`: the period being counted on this CPU (lane). */
struct cp_count_slot {
	__u64 bucket; /* period index: ts / period */
	__u64 count;
	__u32 timebase; /* 0: CLOCK_MONOTONIC ns, 1: TSC ticks */
	__u32 pad;
	/* The period in that timebase: at stop the recorder turns a held bucket
	 * into a start without keeping every rule ever installed. */
	__u64 period;
};

/* A finished period of a `counter` channel on one CPU. */
struct cp_count_rec {
	struct cp_rec_hdr h; /* n = timebase (0 CLOCK_MONOTONIC ns, 1 TSC) */
	__u64 start;	     /* bucket * period, in that timebase */
	__u64 channel;
	__u64 count;
};

#endif
