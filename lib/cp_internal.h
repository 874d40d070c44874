/* Internal declarations shared by the files of libcptrace. */
#ifndef CP_INTERNAL_H
#define CP_INTERNAL_H

#include <stdint.h>

#include "cptrace.h"
#include "cptrace_records.h"

#define CP_HIDDEN __attribute__((visibility("hidden")))

/* registry.c: records `id` -> `name` (once per id; reopening clears `closed`)
 * and returns the stored, NUL-terminated name, or NULL when the registry is
 * full. */
CP_HIDDEN const char *cp_registry_add(uint64_t id, const char *name);
CP_HIDDEN void cp_registry_mark_closed(uint64_t id);

/* follow_wait.c: where `cptrace record` lists the processes it follows. */
#define CP_FOLLOW_DIR "/run/cptrace/follow"
/* 1 if a live recorder follows the parent but is not attached to us yet. */
CP_HIDDEN int cp_follow_expected(void);
/* Waits (bounded) until the recorder is attached to this process. */
CP_HIDDEN void cp_follow_wait(void);

/* recorder_hello.c: tells a recorder that must record us that we loaded the
 * library, and waits (bounded) until it attached. 1 when a recorder answered
 * (no need to look for a follow mark), 0 when none did. */
CP_HIDDEN int cp_hello_recorder(void);

/* ---- A thread's event buffer (batch.c) and its flusher (buffer_flusher.c) ---
 * The owner appends inside `busy`; the flusher thread takes a buffer's
 * entries only under `claimed`. Each side stores its own flag and then reads
 * the other's; the owner with plain accesses (its hot path stays a few ns),
 * the flusher with membarrier() between its store and its read, which orders
 * the owner's accesses as a fence would: so either the owner sees `claimed`
 * and waits, or the flusher sees `busy` and waits (an asymmetric Dekker). */
struct cp_tbuf {
	struct cp_batch_entry e[CP_BATCH_MAX]; /* laid out as the BPF side copies it */
	uint32_t n;			       /* entries in use */
	uint32_t cpu;			       /* whose TSC stamped them (cp_stamp): one CPU per hand-over */
	volatile uint8_t busy;		       /* owner inside an append or a hand-over */
	volatile uint8_t claimed;	       /* flusher taking the entries */
	uint32_t tid;			       /* the owner, named in the flusher's hand-over */
	uint64_t seen_ts0;		       /* flusher only: first stamp at its last look */
	struct cp_tbuf *next;		       /* flusher's list, under its lock */
};

#define cp_compiler_barrier() __asm__ __volatile__("" ::: "memory")

/* PROBE SITES (cp_stubs.S). cp_logTS_site is the single-event site behind
 * cp_logTS; cp_batch_submit_for is cp_batch_submit for entries another thread
 * of this process logged (`tid`), handed over by the flusher. */
void cp_logTS_site(uint64_t channel, uint64_t tuple_id);
void cp_batch_submit_for(const struct cp_batch_entry *e, uint32_t n, const uint32_t *count_at, uint32_t tid);

/* batch.c: 1 when this CPU has rdtscp (cp_stamp reads the CPU with the TSC). */
CP_HIDDEN extern int cp_have_rdtscp;
#define CP_STAMP_CPU_UNKNOWN 0xffffffffu

/* `n` for cp_batch_submit: the count, and the CPU of the entries' stamps
 * (include/cptrace_records.h). */
static inline uint32_t cp_batch_n(uint32_t n, uint32_t cpu)
{
	if (cpu >= CP_STAMP_CPU_MAX)
		return n;
	return n | ((cpu + 1) << CP_BATCH_CPU_SHIFT);
}

/* single_route.c: 1 when single events go through the thread buffer. */
CP_HIDDEN extern int cp_single_buffered;

/* buffer_flusher.c: the list of live buffers, and the thread that hands over
 * what sat in one for a while (only started once singles are buffered). */
CP_HIDDEN void cp_flusher_add(struct cp_tbuf *b);
CP_HIDDEN void cp_flusher_remove(struct cp_tbuf *b);
/* A buffer went from empty to one entry: starts or wakes the flusher. */
CP_HIDDEN void cp_flusher_notify(void);
/* Fork: the child keeps only `self` (its one thread) and no flusher. */
CP_HIDDEN void cp_flusher_after_fork_child(struct cp_tbuf *self);
CP_HIDDEN void cp_flusher_stop(void);

#endif
