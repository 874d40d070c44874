/* workload: the integration tests' event source.
 *
 *   workload [--threads N] [--events N] [--channels N] [--mode single|batch]
 *            [--wait-signal] [--delay-open-ms N] [--pace-us N] [--all-channels] [--hold]
 *
 * Sleeps --delay-open-ms (so a recorder started first sees the channels being
 * announced live), opens channels chan0..chanK-1, then, with --wait-signal,
 * prints "READY <pid>" and waits for SIGUSR1 (so a recorder can attach late and
 * must learn the names from the registry). Then N threads each log --events
 * events, round-robin over the channels, thread t using tuple ids
 * t*1000000000 + i, through cp_logTS (single) or cp_logTS_batch (batch; the
 * buffers are flushed by the library at thread exit). --all-channels: event i
 * is logged on every channel in turn (chan0 first), so each channel sees every
 * tuple id. --pace-us N: event i of a thread is emitted no earlier than
 * start + i*N us (busy wait), so a run lasts long enough to be reconfigured
 * mid-way. --hold: once every event is logged, print "LOGGED <pid>" and wait
 * for another SIGUSR1 (events logged, process alive, channels open). --linger: the
 * same, but the threads that logged stay alive (idle) until that SIGUSR1, so
 * nothing is handed over by their exit meanwhile. --signal-us N: while thread 0
 * logs, a timer interrupts it every N us with SIGALRM, whose handler logs one
 * event on channel "sig" (tuples SIG_BASE + k): calls from a signal handler,
 * many of them inside one of the thread's own. Finally the channels are
 * closed and one JSON line tells what was emitted:
 *
 *   {"pid":P,"mode":"batch","threads":N,"events_per_thread":E,"total":T,
 *    "channels":[{"name":"chan0","id":ID,"emitted":X},...],
 *    "thread_list":[{"thread":0,"tid":TID,"emitted":E,"tuple_base":0},...],
 *    "signal_events":S}
 *
 * Ids are unsigned 64-bit JSON integers. Exit status 0, or 2 on bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cptrace.h"

#define TUPLE_STRIDE 1000000000ull

struct options {
	unsigned threads;
	uint64_t events;
	unsigned channels;
	int batch;
	int wait_signal;
	unsigned delay_open_ms;
	uint64_t pace_us;
	int all_channels;
	int hold;
	int linger;
	uint64_t signal_us;
};

struct worker {
	pthread_t thread;
	unsigned index;
	pid_t tid;
	uint64_t emitted;
	uint64_t *per_channel; /* events this thread logged on each channel */
};

static struct options opt = {2, 1000, 2, 0, 0, 0, 0, 0, 0, 0};

/* --linger: workers that logged wait here until main lets them end. */
static pthread_mutex_t linger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t linger_cond = PTHREAD_COND_INITIALIZER;
static unsigned lingering;
static int linger_over;
static uint64_t *channel_ids;

/* --signal-us: the handler's channel and count. */
#define SIG_BASE 999000000000ull
static uint64_t sig_channel;
static volatile uint64_t sig_events;

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--threads N] [--events N] [--channels N] [--mode single|batch]\n"
		"          [--wait-signal] [--delay-open-ms N] [--pace-us N] [--all-channels] [--hold]\n"
		"          [--linger] [--signal-us N]\n",
		argv0);
	exit(2);
}

static uint64_t parse_count(const char *s, const char *argv0, uint64_t min)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || end == s || v < min)
		usage(argv0);
	return v;
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--wait-signal")) {
			opt.wait_signal = 1;
			continue;
		}
		if (!strcmp(a, "--linger")) {
			opt.linger = 1;
			continue;
		}
		if (!strcmp(a, "--hold")) {
			opt.hold = 1;
			continue;
		}
		if (!strcmp(a, "--all-channels")) {
			opt.all_channels = 1;
			continue;
		}
		if (!v)
			usage(argv[0]);
		if (!strcmp(a, "--threads"))
			opt.threads = parse_count(v, argv[0], 1);
		else if (!strcmp(a, "--events"))
			opt.events = parse_count(v, argv[0], 0);
		else if (!strcmp(a, "--channels"))
			opt.channels = parse_count(v, argv[0], 1);
		else if (!strcmp(a, "--signal-us"))
			opt.signal_us = parse_count(v, argv[0], 1);
		else if (!strcmp(a, "--pace-us"))
			opt.pace_us = parse_count(v, argv[0], 0);
		else if (!strcmp(a, "--delay-open-ms"))
			opt.delay_open_ms = parse_count(v, argv[0], 0);
		else if (!strcmp(a, "--mode") && (!strcmp(v, "single") || !strcmp(v, "batch")))
			opt.batch = !strcmp(v, "batch");
		else
			usage(argv[0]);
		i++;
	}
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void open_channels(void)
{
	channel_ids = calloc(opt.channels, sizeof(*channel_ids));
	if (!channel_ids)
		abort();
	for (unsigned c = 0; c < opt.channels; c++) {
		char name[32];
		snprintf(name, sizeof(name), "chan%u", c);
		channel_ids[c] = cp_open_channel(name);
	}
	if (opt.signal_us)
		sig_channel = cp_open_channel("sig");
}

static void on_alarm(int sig)
{
	(void)sig;
	cp_logTS(sig_channel, SIG_BASE + sig_events);
	sig_events = sig_events + 1;
}

/* A timer that sends SIGALRM to this thread every opt.signal_us. */
static timer_t start_alarms(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct sigevent ev;
	memset(&ev, 0, sizeof(ev));
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGALRM;
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	timer_t t;
	if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0) {
		perror("workload: timer_create");
		exit(1);
	}
	long ns = (long)(opt.signal_us * 1000);
	struct itimerspec its = {{ns / 1000000000L, ns % 1000000000L}, {ns / 1000000000L, ns % 1000000000L}};
	timer_settime(t, 0, &its, NULL);
	return t;
}

/* Stops the timer; a SIGALRM still pending is taken here, in this thread. */
static void stop_alarms(timer_t t)
{
	timer_delete(t);
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	struct timespec zero = {0, 0};
	while (sigtimedwait(&alrm, NULL, &zero) == SIGALRM)
		on_alarm(SIGALRM);
}

/* SIGUSR1 is blocked from the start (and so in every thread), so a signal sent
 * as soon as READY is read stays pending instead of killing us. */
static void block_sigusr1(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, set, NULL);
}

static void wait_for_go(const sigset_t *set)
{
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	int sig;
	while (sigwait(set, &sig) != 0 || sig != SIGUSR1)
		;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void log_one(struct worker *w, unsigned c, uint64_t tuple)
{
	if (opt.batch)
		cp_logTS_batch(channel_ids[c], tuple);
	else
		cp_logTS(channel_ids[c], tuple);
	w->per_channel[c]++;
	w->emitted++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	w->tid = gettid();
	uint64_t base = (uint64_t)(w->index * TUPLE_STRIDE);
	int alarms = opt.signal_us && w->index == 0;
	timer_t timer = 0;
	if (alarms)
		timer = start_alarms();
	uint64_t start = mono_ns();
	for (uint64_t i = 0; i < opt.events; i++) {
		if (opt.pace_us)
			while (mono_ns() < start + i * opt.pace_us * 1000)
				;
		if (opt.all_channels)
			for (unsigned c = 0; c < opt.channels; c++)
				log_one(w, c, base + i);
		else
			log_one(w, i % opt.channels, base + i);
	}
	if (alarms)
		stop_alarms(timer);
	if (opt.linger) {
		pthread_mutex_lock(&linger_lock);
		lingering++;
		pthread_cond_broadcast(&linger_cond);
		while (!linger_over)
			pthread_cond_wait(&linger_cond, &linger_lock);
		pthread_mutex_unlock(&linger_lock);
	}
	return NULL;
}

/* --linger: once every worker logged, says so and waits for SIGUSR1 before
 * letting them end. */
static void linger(const sigset_t *usr1)
{
	pthread_mutex_lock(&linger_lock);
	while (lingering < opt.threads)
		pthread_cond_wait(&linger_cond, &linger_lock);
	pthread_mutex_unlock(&linger_lock);
	printf("LOGGED %d\n", (int)getpid());
	fflush(stdout);
	int sig;
	while (sigwait(usr1, &sig) != 0 || sig != SIGUSR1)
		;
	pthread_mutex_lock(&linger_lock);
	linger_over = 1;
	pthread_cond_broadcast(&linger_cond);
	pthread_mutex_unlock(&linger_lock);
}

static struct worker *run_workers(const sigset_t *usr1)
{
	struct worker *ws = calloc(opt.threads, sizeof(*ws));
	if (!ws)
		abort();
	for (unsigned t = 0; t < opt.threads; t++) {
		ws[t].index = t;
		ws[t].per_channel = calloc(opt.channels, sizeof(uint64_t));
		if (!ws[t].per_channel)
			abort();
		int err = pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]);
		if (err) {
			fprintf(stderr, "workload: pthread_create: %s\n", strerror(err));
			exit(1);
		}
	}
	if (opt.linger)
		linger(usr1);
	/* Joining also waits for each thread's exit-time batch flush. */
	for (unsigned t = 0; t < opt.threads; t++)
		pthread_join(ws[t].thread, NULL);
	return ws;
}

static uint64_t channel_total(const struct worker *ws, unsigned c)
{
	uint64_t sum = 0;
	for (unsigned t = 0; t < opt.threads; t++)
		sum += ws[t].per_channel[c];
	return sum;
}

static void print_report(const struct worker *ws)
{
	uint64_t total = 0;
	for (unsigned t = 0; t < opt.threads; t++)
		total += ws[t].emitted;
	printf("{\"pid\":%d,\"mode\":\"%s\",\"threads\":%u,\"events_per_thread\":%" PRIu64
	       ",\"total\":%" PRIu64 ",\"channels\":[",
	       (int)getpid(), opt.batch ? "batch" : "single", opt.threads, opt.events, total);
	for (unsigned c = 0; c < opt.channels; c++)
		printf("%s{\"name\":\"chan%u\",\"id\":%" PRIu64 ",\"emitted\":%" PRIu64 "}", c ? "," : "", c,
		       channel_ids[c], channel_total(ws, c));
	printf("],\"thread_list\":[");
	for (unsigned t = 0; t < opt.threads; t++)
		printf("%s{\"thread\":%u,\"tid\":%d,\"emitted\":%" PRIu64 ",\"tuple_base\":%" PRIu64 "}",
		       t ? "," : "", t, (int)ws[t].tid, ws[t].emitted, (uint64_t)(t * TUPLE_STRIDE));
	printf("],\"signal_events\":%" PRIu64 "}\n", (uint64_t)sig_events);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	sigset_t usr1;
	block_sigusr1(&usr1);
	sleep_ms(opt.delay_open_ms);
	open_channels();
	if (opt.wait_signal)
		wait_for_go(&usr1);
	struct worker *ws = run_workers(&usr1);
	if (opt.hold) {
		printf("LOGGED %d\n", (int)getpid());
		fflush(stdout);
		int sig;
		while (sigwait(&usr1, &sig) != 0 || sig != SIGUSR1)
			;
	}
	for (unsigned c = 0; c < opt.channels; c++)
		cp_close_channel(channel_ids[c]);
	print_report(ws);
	return 0;
}
