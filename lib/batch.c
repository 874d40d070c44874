/* The thread buffer: events are stamped with rdtsc into a per-thread buffer
 * and handed to the cp_batch_submit probe site CP_BATCH_MAX at a time, so a
 * probe hit (~0.4 us) is paid once per CP_BATCH_MAX events. cp_logTS_batch
 * always logs here; cp_logTS where single_route.c decided so. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <cpuid.h>
#include <unistd.h>
#include <x86intrin.h>

#include "cp_internal.h"

/* initial-exec: one %fs-relative load instead of a __tls_get_addr call per
 * event. Only a pointer lives in TLS, so even a dlopen()ed libcptrace fits in
 * the static TLS surplus glibc reserves for that case. */
static __thread struct cp_tbuf *tls_buf __attribute__((tls_model("initial-exec")));
static __thread volatile uint8_t tls_making __attribute__((tls_model("initial-exec")));

static pthread_key_t tbuf_key; /* its destructor flushes at thread exit */
static pthread_once_t tbuf_once = PTHREAD_ONCE_INIT;
static int tbuf_key_ok; /* 0: no thread-exit flush (no key left) */

/* Every hand-over also names the buffer (&b->n): a recorder that attached
 * after the buffer was made learns of it here, and reads what is left in it
 * when the thread ends without handing it over (bpf/cptrace.bpf.c). */
static void tbuf_submit(struct cp_tbuf *b)
{
	if (b->n) {
		cp_batch_submit(b->e, cp_batch_n(b->n, b->cpu), &b->n);
		b->n = 0;
	}
}

CP_HIDDEN int cp_have_rdtscp;

/* CPUID 0x80000001 EDX bit 27. Before this runs (a constructor of another
 * library logging first) stamps take rdtsc, with no CPU: still right. */
__attribute__((constructor)) static void stamp_init(void)
{
	unsigned a, b, c, d;
	cp_have_rdtscp = __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}

/* The TSC and the CPU it was read on, in one instruction (rdtscp: no
 * migration can fall between the two reads); Linux keeps the CPU number in
 * the low 12 bits of TSC_AUX. Without rdtscp: rdtsc, CPU unknown. */
static inline __attribute__((always_inline)) uint64_t cp_stamp(uint32_t *cpu)
{
	if (__builtin_expect(cp_have_rdtscp, 1)) {
		unsigned aux;
		uint64_t t = __rdtscp(&aux);
		*cpu = aux & 0xfff;
		return t;
	}
	*cpu = CP_STAMP_CPU_UNKNOWN;
	return __rdtsc();
}

/* The flusher holds a claim for the copy of one buffer: wait it out. */
__attribute__((noinline)) static void tbuf_wait_claim(struct cp_tbuf *b)
{
	do {
		b->busy = 0;
		while (b->claimed)
			sched_yield();
		b->busy = 1;
		cp_compiler_barrier();
	} while (b->claimed);
}

/* Enters the owner's side of the protocol (cp_internal.h): busy, and not
 * claimed. */
static inline __attribute__((always_inline)) void tbuf_enter(struct cp_tbuf *b)
{
	b->busy = 1;
	cp_compiler_barrier();
	if (__builtin_expect(b->claimed, 0))
		tbuf_wait_claim(b);
}

static void tbuf_leave(struct cp_tbuf *b)
{
	cp_compiler_barrier();
	b->busy = 0;
}

/* A hand-over outside an append (cp_flush, thread and process exit). */
static void tbuf_submit_owned(struct cp_tbuf *b)
{
	if (b->busy)
		return; /* from a signal handler inside an append: that append goes on */
	tbuf_enter(b);
	tbuf_submit(b);
	tbuf_leave(b);
}

/* The buffer is forgotten before it is freed: its memory may hold anything
 * afterwards, which the exit path must not read as events. */
static void tbuf_thread_exit(void *arg)
{
	struct cp_tbuf *b = arg;
	tbuf_submit_owned(b);
	cp_flusher_remove(b); /* after this the flusher never looks at it */
	cp_batch_submit(b->e, 0, NULL);
	tls_buf = NULL;
	free(b);
}

/* A forked child starts with a copy of the forking thread's buffer: the parent
 * still owns those events and will submit them, so the child drops its copy,
 * and names the buffer again as its own thread's. */
static void tbuf_after_fork_child(void)
{
	if (tls_buf) {
		tls_buf->n = 0;
		tls_buf->claimed = 0; /* a claim of the parent's flusher, which the child lacks */
		tls_buf->tid = (uint32_t)syscall(SYS_gettid);
		cp_batch_submit(tls_buf->e, 0, &tls_buf->n);
	}
	cp_flusher_after_fork_child(tls_buf);
}

static void tbuf_init_once(void)
{
	tbuf_key_ok = pthread_key_create(&tbuf_key, tbuf_thread_exit) == 0;
	pthread_atfork(NULL, NULL, tbuf_after_fork_child);
}

/* The BPF program copies the entries with a non-faulting read, so the whole
 * buffer is written once here: its pages are resident before the first
 * submit, and the hot loop takes no page faults either. */
static struct cp_tbuf *tbuf_create(void)
{
	pthread_once(&tbuf_once, tbuf_init_once);
	struct cp_tbuf *b;
	if (posix_memalign((void **)&b, 64, sizeof(*b)))
		return NULL;
	memset(b, 0, sizeof(*b));
	b->tid = (uint32_t)syscall(SYS_gettid);
	if (tbuf_key_ok)
		pthread_setspecific(tbuf_key, b);
	tls_buf = b;
	cp_batch_submit(b->e, 0, &b->n);
	cp_flusher_add(b);
	return b;
}

/* Appends inside busy; hands the buffer over when full, and has the flusher
 * look at it when it stops being empty (so an idle thread's events still
 * arrive within a bounded delay, buffer_flusher.c). */
static inline __attribute__((always_inline)) void tbuf_put(struct cp_tbuf *b, uint64_t tsc, uint32_t cpu,
							   uint64_t channel, uint64_t tuple_id)
{
	tbuf_enter(b);
	uint32_t n = b->n;
	if (__builtin_expect(n && cpu != b->cpu, 0)) { /* migrated: one CPU per hand-over */
		tbuf_submit(b);
		n = 0;
	}
	b->cpu = cpu;
	b->e[n] = (struct cp_batch_entry){tsc, channel, tuple_id};
	b->n = ++n;
	if (__builtin_expect(n == CP_BATCH_MAX, 0))
		tbuf_submit(b);
	else if (__builtin_expect(n == 1, 0))
		cp_flusher_notify();
	tbuf_leave(b);
}

/* The thread's first event: the buffer is made here (not signal-safe, as
 * cp_logTS_batch never was; cp_logTS's first buffered call is the same, see
 * single_route.c). */
__attribute__((noinline)) static int tbuf_first(uint64_t tsc, uint32_t cpu, uint64_t channel,
						uint64_t tuple_id)
{
	/* A signal handler's call while this thread makes its buffer takes the
	 * site: a second buffer made there would be orphaned by the first. */
	if (tls_making)
		return 0;
	tls_making = 1;
	cp_compiler_barrier();
	struct cp_tbuf *b = tbuf_create();
	cp_compiler_barrier();
	tls_making = 0;
	if (!b)
		return 0;
	tbuf_put(b, tsc, cpu, channel, tuple_id);
	return 1;
}

/* 0 when the event cannot be buffered now: called from a signal handler
 * that interrupted an append of this thread, or out of memory. */
static inline __attribute__((always_inline)) int tbuf_append(uint64_t tsc, uint32_t cpu, uint64_t channel,
							     uint64_t tuple_id)
{
	struct cp_tbuf *b = tls_buf;
	if (__builtin_expect(!b, 0))
		return tbuf_first(tsc, cpu, channel, tuple_id);
	if (__builtin_expect(b->busy, 0))
		return 0;
	tbuf_put(b, tsc, cpu, channel, tuple_id);
	return 1;
}

/* An event into a buffer that single events share (single_route.c): under
 * the protocol. Where it cannot be buffered it goes alone through the single
 * site, which stamps its own (later) TSC: one probe hit, nothing lost. */
__attribute__((noinline)) static void tbuf_log_shared(uint64_t channel, uint64_t tuple_id)
{
	uint32_t cpu;
	uint64_t tsc = cp_stamp(&cpu);
	if (__builtin_expect(!tbuf_append(tsc, cpu, channel, tuple_id), 0))
		cp_logTS_site(channel, tuple_id);
}

__attribute__((noinline)) static void tbuf_full(struct cp_tbuf *b)
{
	tbuf_submit(b);
}

void cp_logTS_batch(uint64_t channel, uint64_t tuple_id)
{
	struct cp_tbuf *b = tls_buf;
	if (__builtin_expect(cp_single_buffered || !b, 0)) {
		tbuf_log_shared(channel, tuple_id);
		return;
	}
	/* No single event shares the buffer and no flusher runs: neither a
	 * nested call nor a claim can meet this append. */
	uint32_t n = b->n, cpu;
	uint64_t tsc = cp_stamp(&cpu);
	if (__builtin_expect(n && cpu != b->cpu, 0)) { /* migrated: one CPU per hand-over */
		tbuf_full(b);
		n = 0;
	}
	b->cpu = cpu;
	b->e[n] = (struct cp_batch_entry){tsc, channel, tuple_id};
	b->n = ++n;
	if (__builtin_expect(n == CP_BATCH_MAX, 0))
		tbuf_full(b);
}

/* A single event: its own probe site, or this thread's buffer where
 * single_route.c chose so. Async-signal-safe, except a thread's first
 * buffered event, which makes its buffer (and the process's first starts the
 * flusher). */
void cp_logTS(uint64_t channel, uint64_t tuple_id)
{
	if (cp_single_buffered)
		tbuf_log_shared(channel, tuple_id);
	else
		cp_logTS_site(channel, tuple_id);
}

void cp_flush(void)
{
	if (tls_buf)
		tbuf_submit_owned(tls_buf);
}

/* Process exit (and dlclose): the thread calling exit() never runs its
 * pthread key destructors, so flush it here. Deleting the key keeps threads
 * that exit after a dlclose() from calling into unmapped code (their buffered
 * events are lost then). */
__attribute__((destructor)) static void tbuf_process_exit(void)
{
	cp_flusher_stop();
	cp_flush();
	if (tbuf_key_ok) {
		tbuf_key_ok = 0;
		pthread_key_delete(tbuf_key);
	}
}
