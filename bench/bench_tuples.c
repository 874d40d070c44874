/* bench_tuples: a three-stage pipeline's events for the analysis benchmark
 * (bench/analysis_scale.sh), logged through the batch path of the library.
 *
 *   bench_tuples [--n N] [--block B] [--rate TUPLES_PER_S]
 *
 * Each of N tuples is logged once on each of "src.out", "mid.in" and
 * "sink.in". Tuples go through in blocks of B (default 1024): stage 1 logs
 * the block in sequence order, stage 2 the same block in a shuffled order,
 * stage 3 in another one. So a tuple's three events are up to a few
 * thousand events apart (median 50 us from first to last, recorded at
 * 1 M tuples/s) and the channels' streams are interleaved and out of order
 * against each other, as in a real pipeline: an analysis must join by id,
 * not by position.
 *
 * Tuple ids are splitmix64 of the sequence number: a bijection of 64-bit
 * integers, so every id is distinct, yet consecutive tuples get ids spread
 * over the whole range (no sorted or dense ids for a hash table or an
 * external sort to profit from).
 *
 * --rate paces the emission (busy wait until each block's due time), for a
 * recorder that would drop at the flat-out rate; 0 (default) is flat out.
 * Prints one line at the end:
 *   tuples n=N events=E seconds=S tuples_per_s=T */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cptrace.h"

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* splitmix64 (Steele, Lea, Flood 2014): the state steps by an odd constant,
 * a bijection mod 2^64, and the finalizer's xor-shifts and odd multiplies
 * are each invertible; so seq -> id is a bijection. */
static uint64_t tuple_id(uint64_t seq)
{
	uint64_t z = (seq + 1) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* xorshift64: cheap, deterministic shuffles (the same trace every run). */
static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Fisher-Yates over the block's ids; the modulo bias of a 64-bit draw over
 * a few thousand slots is irrelevant here. */
static void shuffle(uint64_t *ids, uint32_t n)
{
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(rng_next() % (i + 1));
		uint64_t t = ids[i];
		ids[i] = ids[j];
		ids[j] = t;
	}
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--n N] [--block B] [--rate TUPLES_PER_S]\n", argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t n = 5000000;
	unsigned long block = 1024;
	double rate = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--block") && i + 1 < argc)
			block = strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = strtod(argv[++i], NULL);
		else
			usage(argv[0]);
	}
	if (n == 0 || block < 2 || block > (1ul << 24) || rate < 0)
		usage(argv[0]);

	uint64_t src = cp_open_channel("src.out");
	uint64_t mid = cp_open_channel("mid.in");
	uint64_t sink = cp_open_channel("sink.in");
	uint64_t *ids = malloc(block * sizeof(*ids));
	if (!ids) {
		perror("bench_tuples: malloc");
		return 1;
	}

	double block_ns = rate > 0 ? block * 1e9 / rate : 0, t0 = now_ns();
	for (uint64_t first = 0, k = 0; first < n; first += block, k++) {
		uint32_t m = (uint32_t)(n - first < block ? n - first : block);
		if (rate > 0)
			while (now_ns() < t0 + k * block_ns)
				__asm__ volatile("pause");
		for (uint32_t i = 0; i < m; i++) {
			ids[i] = tuple_id(first + i);
			cp_logTS_batch(src, ids[i]);
		}
		shuffle(ids, m);
		for (uint32_t i = 0; i < m; i++)
			cp_logTS_batch(mid, ids[i]);
		shuffle(ids, m);
		for (uint32_t i = 0; i < m; i++)
			cp_logTS_batch(sink, ids[i]);
	}
	cp_flush();
	double secs = (now_ns() - t0) / 1e9;
	printf("tuples n=%llu events=%llu seconds=%.3f tuples_per_s=%.0f\n", (unsigned long long)n,
	       (unsigned long long)(3 * n), secs, n / secs);
	cp_close_channel(src);
	cp_close_channel(mid);
	cp_close_channel(sink);
	free(ids);
	return 0;
}
