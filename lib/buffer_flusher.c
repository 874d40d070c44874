/* The flusher: a thread that hands over what sat in a thread's buffer for a
 * while, so that buffered events reach the recorder within a bounded delay
 * (a live view stays live) even when their thread went quiet.
 *
 * Started by the first buffer to receive an event once single events are
 * buffered (single_route.c), never otherwise: a program that logs only through
 * the site stays as threaded as it was. Every CP_FLUSH_DELAY_MS it looks at
 * each buffer; one whose first entry is the same as at its last look has
 * waited at least that long, and is claimed, copied and handed over with its
 * owner's tid (cp_batch_submit_for). After a second of empty buffers it sleeps
 * until a buffer receives an event again.
 *
 * The copy goes into the flusher's own buffer, named to the recorder like any
 * thread's: a process killed between the copy and the hand-over still has
 * those entries handed over when the flusher thread ends. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cp_internal.h"

#define CP_FLUSH_DELAY_MS 50
#define CP_FLUSH_IDLE_LOOKS 20 /* empty looks before sleeping */

/* FLUSHER_FAILED: none runs and none will (could not start, or stopped). */
enum { FLUSHER_OFF, FLUSHER_AWAKE, FLUSHER_ASLEEP, FLUSHER_FAILED };

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cp_tbuf *list;	/* every live thread buffer, under list_lock */
static int state = FLUSHER_OFF; /* futex word; atomics only */
static volatile int stopping;
static pthread_t flusher;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static long futex(int *word, int op, int val, const struct timespec *timeout)
{
	return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static int membarrier_cmd(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

/* fork() while the list is changed or a buffer is claimed would leave the
 * child a lock no thread releases. */
static void list_prepare(void)
{
	pthread_mutex_lock(&list_lock);
}

static void list_parent(void)
{
	pthread_mutex_unlock(&list_lock);
}

static void list_child(void)
{
	pthread_mutex_unlock(&list_lock);
}

static void register_atfork(void)
{
	pthread_atfork(list_prepare, list_parent, list_child);
}

CP_HIDDEN void cp_flusher_add(struct cp_tbuf *b)
{
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&list_lock);
	b->next = list;
	list = b;
	pthread_mutex_unlock(&list_lock);
}

CP_HIDDEN void cp_flusher_remove(struct cp_tbuf *b)
{
	pthread_mutex_lock(&list_lock);
	for (struct cp_tbuf **p = &list; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			break;
		}
	pthread_mutex_unlock(&list_lock);
}

CP_HIDDEN void cp_flusher_after_fork_child(struct cp_tbuf *self)
{
	list = self;
	if (self)
		self->next = NULL;
	__atomic_store_n(&state, FLUSHER_OFF, __ATOMIC_RELAXED);
	stopping = 0;
}

/* Takes b's entries into `into` (the flusher's own buffer) and hands them
 * over; called with list_lock held, so b's owner cannot free it meanwhile. */
static void take(struct cp_tbuf *b, struct cp_tbuf *into)
{
	b->claimed = 1;
	/* Every thread of ours passes a full barrier: the owner now sees the
	 * claim, or its busy is visible to us (cp_internal.h). */
	membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
	while (b->busy)
		sched_yield();
	uint32_t n = b->n, cpu = b->cpu;
	memcpy(into->e, b->e, n * sizeof(b->e[0]));
	into->n = n;
	uint32_t tid = b->tid;
	b->n = 0;
	b->seen_ts0 = 0;
	__atomic_store_n(&b->claimed, 0, __ATOMIC_RELEASE);
	if (n)
		cp_batch_submit_for(into->e, cp_batch_n(n, cpu), &into->n, tid);
	into->n = 0;
}

/* One look at every buffer; 1 when some held entries. */
static int look(struct cp_tbuf *own)
{
	int any = 0;
	pthread_mutex_lock(&list_lock);
	for (struct cp_tbuf *b = list; b; b = b->next) {
		if (b == own || b->n == 0) {
			b->seen_ts0 = 0;
			continue;
		}
		any = 1;
		/* A racy read: at worst one look late or one early. */
		uint64_t ts0 = b->e[0].tsc;
		if (ts0 && ts0 == b->seen_ts0)
			take(b, own);
		else
			b->seen_ts0 = ts0;
	}
	pthread_mutex_unlock(&list_lock);
	return any;
}

/* Sleeps until a buffer receives an event. A buffer that did so after our
 * look either saw FLUSHER_ASLEEP (and wakes us) or is seen by the second look,
 * which membarrier orders after our store (cp_flusher_notify has no fence). */
static void sleep_until_notified(struct cp_tbuf *own)
{
	__atomic_store_n(&state, FLUSHER_ASLEEP, __ATOMIC_SEQ_CST);
	membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
	if (look(own) || stopping) {
		__atomic_store_n(&state, FLUSHER_AWAKE, __ATOMIC_SEQ_CST);
		return;
	}
	while (__atomic_load_n(&state, __ATOMIC_SEQ_CST) == FLUSHER_ASLEEP && !stopping)
		futex(&state, FUTEX_WAIT_PRIVATE, FLUSHER_ASLEEP, NULL);
}

static void *flusher_main(void *arg)
{
	struct cp_tbuf *own = arg;
	prctl(PR_SET_NAME, "cptrace-flush", 0, 0, 0);
	cp_batch_submit(own->e, 0, &own->n); /* names our buffer to the recorder */
	struct timespec delay = {0, CP_FLUSH_DELAY_MS * 1000000L};
	int idle = 0;
	while (!stopping) {
		futex(&state, FUTEX_WAIT_PRIVATE, FLUSHER_AWAKE, &delay); /* a timed sleep stop can cut */
		if (stopping)
			break;
		idle = look(own) ? 0 : idle + 1;
		if (idle >= CP_FLUSH_IDLE_LOOKS) {
			sleep_until_notified(own);
			idle = 0;
		}
	}
	cp_batch_submit(own->e, 0, NULL);
	return NULL;
}

/* With every signal blocked, so that none meant for the program lands here. */
static void start(void)
{
	struct cp_tbuf *own;
	if (membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0 ||
	    posix_memalign((void **)&own, 64, sizeof(*own)) != 0)
		goto failed;
	memset(own, 0, sizeof(*own));
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(&flusher, NULL, flusher_main, own);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err == 0)
		return;
	free(own);
failed:
	/* No flusher: buffers are still handed over when full, at cp_flush and at
	 * exit, but an idle thread's events wait; single events go to the site. */
	__atomic_store_n(&state, FLUSHER_FAILED, __ATOMIC_SEQ_CST);
	cp_single_buffered = 0;
}

CP_HIDDEN void cp_flusher_notify(void)
{
	int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
	if (__builtin_expect(s == FLUSHER_AWAKE || s == FLUSHER_FAILED, 1))
		return;
	if (s == FLUSHER_OFF) {
		if (!cp_single_buffered)
			return; /* only batch users: the flusher is not theirs to start */
		if (__atomic_compare_exchange_n(&state, &s, FLUSHER_AWAKE, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			start();
		return;
	}
	if (__atomic_exchange_n(&state, FLUSHER_AWAKE, __ATOMIC_SEQ_CST) == FLUSHER_ASLEEP)
		futex(&state, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* Process exit and dlclose: the thread must not run on in unmapped code.
 * Bounded: a flusher waiting on an owner that will never leave its append
 * (exit() from a signal handler inside one) is left to the process's end. */
CP_HIDDEN void cp_flusher_stop(void)
{
	int s = __atomic_load_n(&state, __ATOMIC_SEQ_CST);
	if (s == FLUSHER_OFF &&
	    __atomic_compare_exchange_n(&state, &s, FLUSHER_FAILED, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return; /* none started, and none may start while the process ends */
	if (s != FLUSHER_AWAKE && s != FLUSHER_ASLEEP)
		return;
	stopping = 1;
	__atomic_store_n(&state, FLUSHER_AWAKE, __ATOMIC_SEQ_CST);
	futex(&state, FUTEX_WAKE_PRIVATE, 1, NULL);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 200 * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	if (pthread_timedjoin_np(flusher, NULL, &until) == 0)
		__atomic_store_n(&state, FLUSHER_FAILED, __ATOMIC_SEQ_CST); /* not again */
}
