/* bench_logts: cost of one event on each logging path, in ns/event.
 *
 *   bench_logts [--only single|batch|baseline] [--n N] [--uprobe]
 *   bench_logts --only single|batch --rate PER_S --seconds S
 *
 *   empty_loop   the loop itself, nothing called
 *   bare_nop5    a direct call to a bare `nop5; ret` (the probe site before it
 *                stamped the TSC: what the stamp adds, next line)
 *   local_nop5   a direct call to a probe site made by the library's macro in
 *                this program (TSC stamp, nop5, ret: what a probe site costs
 *                at best, without the PLT)
 *   cp_logTS     through the PLT: its probe site, or the thread's buffer where
 *                the library buffers single events (CPTRACE_SINGLE, docs/record.md)
 *   batch        cp_logTS_batch, submits included (one per 256 events)
 *
 * Prints figures only, never a verdict: run it plainly for the "nothing
 * attached" cost, or under `cptrace record` to see what recording adds
 * ("--only single" / "--only batch" keep the run to the path of interest).
 * --uprobe attaches a bare counting uprobe (perf, no BPF program) to
 * cp_logTS and cp_batch_submit of this process for the runs: the kernel's
 * share of a recorded event, without the recorder (needs root).
 *
 * --rate: a paced emitter instead (bench/zero_drop.py drives it under the
 * recorder): one thread logs chunks of 1000 events on the chosen path, busy
 * waiting until each chunk's due time, for S seconds; then one line
 *   paced path=P target=R n=N achieved=A late_ms=L cpu_s=C max_late_ms=M behind_pct=B
 * with the events emitted, the rate achieved, how far the last chunk started
 * behind its due time, this process's CPU time since it started (uprobe
 * programs run in it, so their cost is in C, not in the recorder's), the
 * most any chunk started late, and the share of chunks that started more than
 * 1 ms late: those were logged at the emitter's full speed while it caught
 * up, so only 100 - B percent of the run was paced at the target. A late
 * emitter still logs every chunk (N is the target times S), so A is below R
 * by what the machine could not give it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cptrace.h"
#include "cptrace_probe_site.h"

/* Made by the library's probe-site macro (lib/probe_site.h), but in this
 * executable: the floor for any call. */
__asm__(".include \"probe_site.h\"\n"
	".text\n"
	"CP_PROBE_SITE bench_local_nop5\n"
	".p2align 4\n"
	"bench_bare_nop5:\n"
	".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"ret\n");
void bench_local_nop5(uint64_t a, uint64_t b);
void bench_bare_nop5(uint64_t a, uint64_t b);

typedef void (*event_fn)(uint64_t channel, uint64_t tuple_id);

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The empty asm with i as input keeps the compiler from deleting the loop. */
static double run_empty(uint64_t n)
{
	double t0 = now_ns();
	for (uint64_t i = 0; i < n; i++)
		__asm__ volatile("" : : "r"(i));
	return (now_ns() - t0) / n;
}

/* One loop per path rather than a function pointer, so each is measured as an
 * application would call it (direct call, or call through the PLT). */
#define DEFINE_RUN(name, call)                                                                               \
	static double name(uint64_t ch, uint64_t n)                                                          \
	{                                                                                                    \
		double t0 = now_ns();                                                                        \
		for (uint64_t i = 0; i < n; i++)                                                             \
			call(ch, i);                                                                         \
		return (now_ns() - t0) / n;                                                                  \
	}
DEFINE_RUN(run_local_nop5, bench_local_nop5)
DEFINE_RUN(run_bare_nop5, bench_bare_nop5)
DEFINE_RUN(run_single, cp_logTS)
DEFINE_RUN(run_batch, cp_logTS_batch)

/* ---- --rate: paced emission ---- */

#define PACE_CHUNK 1000
/* A chunk that starts more than this after its due time was logged while the
 * emitter caught up (at its full speed, not the target's): counted, so a
 * figure at a target rate says how much of it was really paced. */
#define BEHIND_NS 1e6

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static void run_paced(uint64_t ch, int batch, double rate, double seconds)
{
	double chunk_ns = PACE_CHUNK * 1e9 / rate, t0 = now_ns(), end = t0 + seconds * 1e9;
	double late = 0, max_late = 0;
	uint64_t n = 0, behind = 0, chunks = 0;
	for (uint64_t k = 0;; k++) {
		double due = t0 + k * chunk_ns, t;
		if (due >= end)
			break;
		while ((t = now_ns()) < due)
			__asm__ volatile("pause");
		late = t - due;
		if (late > max_late)
			max_late = late;
		behind += late > BEHIND_NS;
		chunks++;
		if (batch)
			for (int i = 0; i < PACE_CHUNK; i++)
				cp_logTS_batch(ch, n + i);
		else
			for (int i = 0; i < PACE_CHUNK; i++)
				cp_logTS(ch, n + i);
		n += PACE_CHUNK;
	}
	double secs = (now_ns() - t0) / 1e9;
	if (batch)
		cp_flush();
	printf("paced path=%s target=%.0f n=%llu achieved=%.0f late_ms=%.3f cpu_s=%.3f max_late_ms=%.3f "
	       "behind_pct=%.1f\n",
	       batch ? "batch" : "single", rate, (unsigned long long)n, n / secs, late / 1e6, cpu_seconds(),
	       max_late / 1e6, chunks ? 100.0 * behind / chunks : 0.0);
	fflush(stdout);
}

/* ---- --uprobe: a counting uprobe on a probe site of the loaded library ---- */

struct file_offset_query {
	uintptr_t addr;
	const char *path;
	uint64_t offset;
	int found;
};

/* The file offset of an address: what a uprobe is attached at. */
static int find_file_offset(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct file_offset_query *q = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_LOAD || q->addr < start || q->addr >= start + ph->p_filesz)
			continue;
		q->offset = q->addr - start + ph->p_offset;
		q->found = 1;
		return 1;
	}
	return 0;
}

static int uprobe_pmu_type(void)
{
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	int t = -1;
	if (f) {
		if (fscanf(f, "%d", &t) != 1)
			t = -1;
		fclose(f);
	}
	return t;
}

/* A perf counter of the hits of the probe site `fn` (on its nop, where the
 * recorder attaches) in this thread; -1 if unavailable. */
static int open_uprobe_counter(void *fn)
{
	Dl_info info;
	struct file_offset_query q = {(uintptr_t)fn + CP_SITE_NOP_OFFSET, NULL, 0, 0};
	int type = uprobe_pmu_type();
	if (type < 0 || !dladdr(fn, &info) || !info.dli_fname)
		return -1;
	dl_iterate_phdr(find_file_offset, &q);
	if (!q.found)
		return -1;
	struct perf_event_attr a = {0};
	a.size = sizeof(a);
	a.type = type;
	a.config1 = (uint64_t)(uintptr_t)info.dli_fname;
	a.config2 = q.offset;
	return syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int probe_fds[2] = {-1, -1};

static void attach_uprobes(void)
{
	/* The site behind cp_logTS (a library before the split: cp_logTS itself). */
	void *single = dlsym(RTLD_DEFAULT, "cp_logTS_site");
	void *sites[2] = {single ? single : (void *)cp_logTS, (void *)cp_batch_submit};
	for (int i = 0; i < 2; i++) {
		probe_fds[i] = open_uprobe_counter(sites[i]);
		if (probe_fds[i] < 0) {
			perror("bench_logts: --uprobe: perf_event_open");
			exit(1);
		}
	}
}

/* Hits since the last call, over all attached probes ("" when none). */
static const char *probe_hits(char *buf, size_t len)
{
	uint64_t total = 0;
	buf[0] = '\0';
	if (probe_fds[0] < 0)
		return buf;
	for (int i = 0; i < 2; i++) {
		uint64_t n = 0;
		if (read(probe_fds[i], &n, sizeof(n)) == sizeof(n))
			total += n;
		ioctl(probe_fds[i], PERF_EVENT_IOC_RESET, 0);
	}
	snprintf(buf, len, " uprobe_hits=%llu", (unsigned long long)total);
	return buf;
}

static void report(const char *name, uint64_t n, double ns)
{
	char hits[64];
	printf("%-12s n=%-12llu ns/event=%.2f%s\n", name, (unsigned long long)n, ns,
	       probe_hits(hits, sizeof(hits)));
	fflush(stdout);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--only single|batch|baseline] [--n N] [--uprobe]\n"
		"       %s --only single|batch --rate PER_S --seconds S\n",
		argv0, argv0);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	uint64_t n = 50000000;
	int uprobe = 0;
	double rate = 0, seconds = 10;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--uprobe"))
			uprobe = 1;
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 0);
		else
			usage(argv[0]);
	}
	if (n == 0 || (only && strcmp(only, "single") && strcmp(only, "batch") && strcmp(only, "baseline")))
		usage(argv[0]);
	if (rate < 0 || seconds <= 0 || (rate > 0 && (!only || !strcmp(only, "baseline"))))
		usage(argv[0]);

	uint64_t ch = cp_open_channel("bench.logts");
	if (rate > 0) {
		run_paced(ch, !strcmp(only, "batch"), rate, seconds);
		cp_close_channel(ch);
		return 0;
	}
	if (uprobe)
		attach_uprobes();
	int all = only == NULL;
	if (all || !strcmp(only, "baseline")) {
		report("empty_loop", n, run_empty(n));
		report("bare_nop5", n, run_bare_nop5(ch, n));
		report("local_nop5", n, run_local_nop5(ch, n));
	}
	if (all || !strcmp(only, "single"))
		report("cp_logTS", n, run_single(ch, n));
	if (all || !strcmp(only, "batch")) {
		double ns = run_batch(ch, n);
		cp_flush();
		report("batch", n, ns);
	}
	cp_close_channel(ch);
	return 0;
}
