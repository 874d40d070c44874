/* stamp_pair: one thread logs each tuple on "pair.in" then on "pair.out",
 * every call bracketed by the caller's own TSC reads, so a test knows the
 * duration of every pair to within its brackets and which pairs were stamped
 * on two CPUs.
 *
 *   stamp_pair OUT [--events N] [--move-every K]
 *
 * The thread runs on CPU 0. With --move-every K (K > 0), before the
 * "pair.out" call of every K-th tuple it moves itself to the other CPU of
 * {0, 1} (sched_setaffinity, which returns on the new CPU), so that pair's
 * stamps are read on two CPUs. OUT gets one line per tuple:
 *
 *   TUPLE MOVED IN0 IN1 OUT0 OUT1
 *
 * Exit status 0, 1 when OUT cannot be written or the CPU cannot be set, 2 on
 * bad usage. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "cptrace.h"

struct pair {
	uint64_t t[4]; /* in: before, after; out: before, after */
	int moved;
};

static inline uint64_t tsc_fenced(void)
{
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}

static int run_on(int cpu)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof one, &one) == 0)
		return 0;
	perror("stamp_pair: sched_setaffinity");
	return -1;
}

static uint64_t parse(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end) {
		fprintf(stderr, "stamp_pair: `%s` is not a number\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: stamp_pair OUT [--events N] [--move-every K]\n");
		return 2;
	}
	uint64_t events = 1000, move_every = 0;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--events"))
			events = parse(argv[i + 1]);
		else if (!strcmp(argv[i], "--move-every"))
			move_every = parse(argv[i + 1]);
		else {
			fprintf(stderr, "stamp_pair: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	struct pair *p = calloc(events ? events : 1, sizeof *p);
	if (!p || run_on(0))
		return 1;
	int cpu = 0;
	uint64_t in = cp_open_channel("pair.in"), out = cp_open_channel("pair.out");
	for (uint64_t i = 0; i < events; i++) {
		p[i].t[0] = tsc_fenced();
		cp_logTS(in, i);
		p[i].t[1] = tsc_fenced();
		if (move_every && i % move_every == 0) {
			cpu ^= 1;
			if (run_on(cpu))
				return 1;
			p[i].moved = 1;
		}
		p[i].t[2] = tsc_fenced();
		cp_logTS(out, i);
		p[i].t[3] = tsc_fenced();
	}
	cp_close_channel(in);
	cp_close_channel(out);
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	for (uint64_t i = 0; i < events; i++)
		fprintf(f, "%" PRIu64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", i, p[i].moved,
			p[i].t[0], p[i].t[1], p[i].t[2], p[i].t[3]);
	return fclose(f) ? 1 : 0;
}
