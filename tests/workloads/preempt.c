/* preempt: threads that preempt each other on one CPU while they log.
 *
 *   preempt [--cpu N] [--loggers N] [--events N] [--period-us N] [--burst N]
 *           [--mode single|batch]
 *
 * Every thread is pinned to CPU --cpu (default 0). --loggers threads (SCHED_OTHER)
 * each log --events events flat out; one SCHED_FIFO thread (priority 50) wakes
 * every --period-us and logs --burst events, so on a preemptible kernel
 * (preempt=full, PREEMPT_RT) it preempts a logger in the middle of its probe:
 * two threads then run the same BPF program on one CPU, interleaved. It stops
 * once the loggers are done. Each event is logged on the three channels
 * "plain", "first" and "count" in turn, so that each sees every event (the test
 * gives "first" a firstlast and "count" a counter handler). The main thread logs
 * one event before the threads start (tuple OPEN_TUPLE) and one after they all
 * ended (CLOSE_TUPLE): with the threads' events between them, these are the
 * first and the last of every channel. Logger t uses tuples t*1000000000 + i,
 * the FIFO thread 900000000000 + i. Finally one JSON line:
 *
 *   {"pid":P,"mode":"single","loggers":N,"events_per_logger":E,"fifo_events":F,
 *    "fifo_wakeups":W,"fifo":1,"per_channel":T,"open_tuple":..,"close_tuple":..}
 *
 * per_channel = N*E + F + 2 events on each channel; fifo 0 when SCHED_FIFO was
 * refused (not root). Exit status 0, 2 on bad usage, 1 when pinning failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cptrace.h"

#define TUPLE_STRIDE 1000000000ull
#define FIFO_TUPLE_BASE 900000000000ull
#define OPEN_TUPLE 990000000000ull
#define CLOSE_TUPLE 990000000001ull
#define NCHANNELS 3

static const char *const channel_names[NCHANNELS] = {"plain", "first", "count"};
static uint64_t channels[NCHANNELS];

static struct {
	int cpu;
	unsigned loggers;
	uint64_t events;
	unsigned period_us;
	unsigned burst;
	int batch;
} opt = {0, 2, 4000, 200, 20, 0};

static atomic_int loggers_done;
static uint64_t fifo_events, fifo_wakeups;

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--cpu N] [--loggers N] [--events N] [--period-us N] [--burst N]\n"
		"          [--mode single|batch]\n",
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
	for (int i = 1; i < argc; i += 2) {
		if (i + 1 >= argc)
			usage(argv[0]);
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--cpu"))
			opt.cpu = (int)parse_count(v, argv[0], 0);
		else if (!strcmp(a, "--loggers"))
			opt.loggers = (unsigned)parse_count(v, argv[0], 1);
		else if (!strcmp(a, "--events"))
			opt.events = parse_count(v, argv[0], 0);
		else if (!strcmp(a, "--period-us"))
			opt.period_us = (unsigned)parse_count(v, argv[0], 1);
		else if (!strcmp(a, "--burst"))
			opt.burst = (unsigned)parse_count(v, argv[0], 1);
		else if (!strcmp(a, "--mode") && (!strcmp(v, "single") || !strcmp(v, "batch")))
			opt.batch = !strcmp(v, "batch");
		else
			usage(argv[0]);
	}
}

/* One event on every channel. */
static void log_all(uint64_t tuple)
{
	for (int c = 0; c < NCHANNELS; c++) {
		if (opt.batch)
			cp_logTS_batch(channels[c], tuple);
		else
			cp_logTS(channels[c], tuple);
	}
}

static void *logger_main(void *arg)
{
	uint64_t base = (uint64_t)(uintptr_t)arg * TUPLE_STRIDE;
	for (uint64_t i = 0; i < opt.events; i++)
		log_all(base + i);
	atomic_fetch_add(&loggers_done, 1);
	return NULL;
}

/* Sleeps a period, then logs a burst, until every logger is done. */
static void *fifo_main(void *arg)
{
	(void)arg;
	struct timespec period = {0, (long)opt.period_us * 1000L};
	while (atomic_load(&loggers_done) < (int)opt.loggers) {
		nanosleep(&period, NULL);
		fifo_wakeups++;
		for (unsigned i = 0; i < opt.burst; i++)
			log_all(FIFO_TUPLE_BASE + fifo_events++);
	}
	return NULL;
}

/* The FIFO thread; *fifo = 0 when the kernel refused SCHED_FIFO (then it runs
 * as SCHED_OTHER). */
static int start_fifo(pthread_t *t, int *fifo)
{
	pthread_attr_t attr;
	struct sched_param sp = {.sched_priority = 50};
	pthread_attr_init(&attr);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	pthread_attr_setschedparam(&attr, &sp);
	*fifo = pthread_create(t, &attr, fifo_main, NULL) == 0;
	pthread_attr_destroy(&attr);
	return *fifo ? 0 : pthread_create(t, NULL, fifo_main, NULL);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(opt.cpu, &set);
	/* Before any thread exists: they all inherit the one CPU. */
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		return 1;
	}
	for (int c = 0; c < NCHANNELS; c++)
		channels[c] = cp_open_channel(channel_names[c]);
	log_all(OPEN_TUPLE);
	cp_flush(); /* batch mode: handed over before any thread's batch */
	pthread_t *ts = calloc(opt.loggers, sizeof(*ts));
	if (!ts)
		abort();
	for (unsigned t = 0; t < opt.loggers; t++)
		if (pthread_create(&ts[t], NULL, logger_main, (void *)(uintptr_t)t))
			abort();
	pthread_t fifo_thread;
	int fifo = 0;
	if (start_fifo(&fifo_thread, &fifo))
		abort();
	for (unsigned t = 0; t < opt.loggers; t++)
		pthread_join(ts[t], NULL);
	pthread_join(fifo_thread, NULL);
	log_all(CLOSE_TUPLE);
	cp_flush();
	for (int c = 0; c < NCHANNELS; c++)
		cp_close_channel(channels[c]);
	printf("{\"pid\":%d,\"mode\":\"%s\",\"loggers\":%u,\"events_per_logger\":%" PRIu64
	       ",\"fifo_events\":%" PRIu64 ",\"fifo_wakeups\":%" PRIu64
	       ",\"fifo\":%d,\"per_channel\":%" PRIu64 ",\"open_tuple\":%llu"
	       ",\"close_tuple\":%llu}\n",
	       (int)getpid(), opt.batch ? "batch" : "single", opt.loggers, opt.events, fifo_events,
	       fifo_wakeups, fifo, opt.loggers * opt.events + fifo_events + 2, OPEN_TUPLE, CLOSE_TUPLE);
	free(ts);
	return 0;
}
