/* The batch path: events are stamped with rdtsc into a per-thread buffer and
 * handed to the cp_batch_submit probe site CP_BATCH_MAX at a time, so a probe
 * hit (~0.4 us) is paid once per CP_BATCH_MAX events. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "cp_internal.h"

struct cp_tbuf {
	struct cp_batch_entry e[CP_BATCH_MAX]; /* laid out as the BPF side copies it */
	uint32_t n;			       /* entries in use */
};

/* initial-exec: one %fs-relative load instead of a __tls_get_addr call per
 * event. Only a pointer lives in TLS, so even a dlopen()ed libcptrace fits in
 * the static TLS surplus glibc reserves for that case. */
static __thread struct cp_tbuf *tls_buf __attribute__((tls_model("initial-exec")));

static pthread_key_t tbuf_key; /* its destructor flushes at thread exit */
static pthread_once_t tbuf_once = PTHREAD_ONCE_INIT;
static int tbuf_key_ok; /* 0: no thread-exit flush (no key left) */

/* Every hand-over also names the buffer (&b->n): a recorder that attached
 * after the buffer was made learns of it here, and reads what is left in it
 * when the thread ends without handing it over (bpf/cptrace.bpf.c). */
static void tbuf_submit(struct cp_tbuf *b)
{
	if (b->n) {
		cp_batch_submit(b->e, b->n, &b->n);
		b->n = 0;
	}
}

/* The buffer is forgotten before it is freed: its memory may hold anything
 * afterwards, which the exit path must not read as events. */
static void tbuf_thread_exit(void *arg)
{
	struct cp_tbuf *b = arg;
	tbuf_submit(b);
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
		cp_batch_submit(tls_buf->e, 0, &tls_buf->n);
	}
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
	if (tbuf_key_ok)
		pthread_setspecific(tbuf_key, b);
	tls_buf = b;
	cp_batch_submit(b->e, 0, &b->n);
	return b;
}

/* Out of memory: hand the event over alone rather than lose it. */
static void submit_unbuffered(uint64_t channel, uint64_t tuple_id)
{
	struct cp_batch_entry e = {__rdtsc(), channel, tuple_id};
	cp_batch_submit(&e, 1, NULL);
}

__attribute__((noinline)) static void tbuf_slow_path(uint64_t channel, uint64_t tuple_id)
{
	struct cp_tbuf *b = tbuf_create();
	if (b)
		cp_logTS_batch(channel, tuple_id);
	else
		submit_unbuffered(channel, tuple_id);
}

void cp_logTS_batch(uint64_t channel, uint64_t tuple_id)
{
	struct cp_tbuf *b = tls_buf;
	if (__builtin_expect(!b, 0)) {
		tbuf_slow_path(channel, tuple_id);
		return;
	}
	uint32_t n = b->n;
	b->e[n] = (struct cp_batch_entry){__rdtsc(), channel, tuple_id};
	b->n = ++n;
	if (__builtin_expect(n == CP_BATCH_MAX, 0))
		tbuf_submit(b);
}

void cp_flush(void)
{
	if (tls_buf)
		tbuf_submit(tls_buf);
}

/* Process exit (and dlclose): the thread calling exit() never runs its
 * pthread key destructors, so flush it here. Deleting the key keeps threads
 * that exit after a dlclose() from calling into unmapped code (their buffered
 * events are lost then). */
__attribute__((destructor)) static void tbuf_process_exit(void)
{
	cp_flush();
	if (tbuf_key_ok) {
		tbuf_key_ok = 0;
		pthread_key_delete(tbuf_key);
	}
}
