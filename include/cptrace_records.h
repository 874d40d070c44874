/* Record layouts shared by the BPF programs (bpf/) and the collector (user/).
 *
 * These are the records that cross the kernel/user boundary through the per-CPU
 * ring buffers. They are defined once, here. Everything after the collector uses
 * the decoded trace_event of user/trace_format.h instead.
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
	CP_REC_EVENT = 1,   /* one cp_logTS() call, kernel-timestamped (CLOCK_MONOTONIC ns) */
	CP_REC_BATCH = 2,   /* n user-timestamped (TSC) events from cp_batch_submit() */
	CP_REC_CHANNEL = 3, /* a channel id -> name announcement from cp_open_channel() */
	CP_REC_CLOSE = 4,   /* cp_close_channel() */
	CP_REC_BATCH_MONO = 5, /* as CP_REC_BATCH, entries stamped CLOCK_MONOTONIC ns
	                        * (Java's System.nanoTime(), cp_batch_submit_mono) */
};

/* Every ring record starts with this header. */
struct cp_rec_hdr {
	__u16 kind;  /* enum cp_rec_kind */
	__u16 cpu;   /* CPU the probe fired on */
	__u32 pid;   /* tgid */
	__u32 tid;   /* kernel thread id */
	__u32 n;     /* CP_REC_BATCH: number of valid entries; else 0 */
};

struct cp_event_rec {
	struct cp_rec_hdr h;
	__u64 ktime_ns;     /* bpf_ktime_get_ns() at probe entry */
	__u64 channel;
	__u64 tuple;
};

/* One entry of a user-space batch, exactly as the application library lays it
 * out in its thread-local buffer (the BPF program copies it verbatim). */
struct cp_batch_entry {
	__u64 tsc;          /* rdtsc() at the cp_logTS_batch() call; System.nanoTime()
	                     * from Java (cp_batch_submit_mono, CP_REC_BATCH_MONO) */
	__u64 channel;
	__u64 tuple;
};

/* Attach cookie of the batch program: which timebase the entries carry. */
#define CP_COOKIE_BATCH_TSC 0
#define CP_COOKIE_BATCH_MONO 1

struct cp_batch_rec {  /* CP_REC_BATCH and CP_REC_BATCH_MONO */
	struct cp_rec_hdr h;
	__u64 ktime_ns;     /* when the batch was handed over */
	struct cp_batch_entry e[CP_BATCH_MAX];
};

struct cp_channel_rec {
	struct cp_rec_hdr h;
	__u64 ktime_ns;
	__u64 channel;
	char name[CP_CHANNEL_NAME_MAX];
};

/* Index of the per-CPU counters in the BPF `counters` percpu array. Counts are
 * in events (a dropped batch of n counts n), so that
 *   recorded + dropped == emitted   holds exactly. */
enum cp_counter {
	CP_CNT_SEEN = 0,     /* events the probes saw */
	CP_CNT_DROPPED = 1,  /* events whose ring reservation failed */
	CP_CNT_READ_FAIL = 2,/* batch copies that failed (counted as dropped too) */
	CP_CNT_MAX = 8,
};

#endif
