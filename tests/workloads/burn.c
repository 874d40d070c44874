/* burn MS: spends MS milliseconds of its own CPU time (CLOCK_PROCESS_CPUTIME_ID)
 * in a busy loop, then prints the CPU time it measured, in ns, on stderr. A workload whose
 * CPU time is known, for checking `cptrace overhead`. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 2 || atof(argv[1]) <= 0) {
		fprintf(stderr, "usage: burn MILLISECONDS\n");
		return 2;
	}
	long long target = (long long)(atof(argv[1]) * 1e6), now;
	volatile unsigned long long x = 1;
	while ((now = cpu_ns()) < target)
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ULL + 1;
	fprintf(stderr, "%lld\n", now);
	return 0;
}
