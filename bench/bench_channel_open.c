/* bench_channel_open: what opening and closing a channel costs a program, by
 * how many names its registry holds (lib/registry.c).
 *
 *   bench_channel_open [--n N]
 *
 * Fills the registry to 1, 1 024, 16 384 names and past its cap
 * (CP_REGISTRY_MAX_NAMES), and at each size prints the mean ns of
 * cp_open_channel + cp_close_channel of the newest name it holds, and of
 * cp_open_channel of a name past the cap (refused, counted). Figures only; run
 * with nothing attached (the announce is then a nop5). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cptrace.h>
#include <cptrace_registry.h>

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void fill_to(long *have, long want)
{
	char name[64];
	for (; *have < want; ++*have) {
		snprintf(name, sizeof name, "fill.%ld", *have);
		cp_open_channel(name);
	}
}

int main(int argc, char **argv)
{
	long n = 20000;
	for (int i = 1; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--n"))
			n = atol(argv[i + 1]);
	const long sizes[] = {1, 1024, 16384, CP_REGISTRY_MAX_NAMES};
	long have = 0;
	char name[64];
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		fill_to(&have, sizes[s]);
		snprintf(name, sizeof name, "fill.%ld", have - 1); /* the newest: a scan's worst */
		double t0 = now_ns();
		for (long i = 0; i < n; i++)
			cp_close_channel(cp_open_channel(name));
		double kept = (now_ns() - t0) / (double)n;
		double past = 0;
		if (sizes[s] == CP_REGISTRY_MAX_NAMES) {
			t0 = now_ns();
			for (long i = 0; i < n; i++) {
				snprintf(name, sizeof name, "past.%ld", i);
				cp_open_channel(name);
			}
			past = (now_ns() - t0) / (double)n;
		}
		printf("names=%ld open+close_kept_ns=%.1f", sizes[s], kept);
		if (past > 0)
			printf(" open_past_cap_ns=%.1f", past);
		printf("\n");
	}
	return 0;
}
