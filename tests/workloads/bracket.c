/* bracket: cp_logTS calls, each bracketed by the caller's own TSC reads, so a
 * test knows the instant of every event to within its bracket.
 *
 *   bracket OUT [--threads N] [--events N]
 *
 * N threads each log --events events on channel "bracket" (thread t: tuple ids
 * t*1000000000 + i); every call is `lfence; rdtsc; lfence; cp_logTS; lfence;
 * rdtsc` (lfence: no TSC read moves across the call). Then the channel is
 * closed, bracketed the same way. OUT gets one line per call:
 *
 *   TUPLE T0 T1           (cp_logTS)
 *   close T0 T1           (cp_close_channel)
 *
 * Exit status 0, 1 when OUT cannot be written, 2 on bad usage. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "cptrace.h"

#define TUPLE_STRIDE 1000000000ull

struct worker {
	pthread_t thread;
	unsigned index;
	uint64_t events;
	uint64_t channel;
	uint64_t *t; /* 2 per event: before, after */
};

static inline uint64_t tsc_fenced(void)
{
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}

static void *run_worker(void *arg)
{
	struct worker *w = arg;
	for (uint64_t i = 0; i < w->events; i++) {
		w->t[2 * i] = tsc_fenced();
		cp_logTS(w->channel, w->index * TUPLE_STRIDE + i);
		w->t[2 * i + 1] = tsc_fenced();
	}
	return NULL;
}

static uint64_t parse(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end) {
		fprintf(stderr, "bracket: `%s` is not a number\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	unsigned threads = 1;
	uint64_t events = 1000;
	if (argc < 2 || argc % 2) {
		fprintf(stderr, "usage: %s OUT [--threads N] [--events N]\n", argv[0]);
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--threads"))
			threads = (unsigned)parse(argv[i + 1]);
		else if (!strcmp(argv[i], "--events"))
			events = parse(argv[i + 1]);
		else {
			fprintf(stderr, "bracket: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (threads == 0)
		threads = 1;
	uint64_t ch = cp_open_channel("bracket");
	struct worker *w = calloc(threads, sizeof(*w));
	for (unsigned k = 0; k < threads && w; k++) {
		w[k] = (struct worker){.index = k,
				       .events = events,
				       .channel = ch,
				       .t = malloc(2 * events * sizeof(uint64_t) + 1)};
		if (!w[k].t || pthread_create(&w[k].thread, NULL, run_worker, &w[k])) {
			fprintf(stderr, "bracket: cannot start thread %u\n", k);
			return 1;
		}
	}
	for (unsigned k = 0; k < threads; k++)
		pthread_join(w[k].thread, NULL);
	uint64_t c0 = tsc_fenced();
	cp_close_channel(ch);
	uint64_t c1 = tsc_fenced();

	FILE *f = fopen(argv[1], "w");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	for (unsigned k = 0; k < threads; k++)
		for (uint64_t i = 0; i < events; i++)
			fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", k * TUPLE_STRIDE + i,
				w[k].t[2 * i], w[k].t[2 * i + 1]);
	fprintf(f, "close %" PRIu64 " %" PRIu64 "\n", c0, c1);
	return fclose(f) ? 1 : 0;
}
