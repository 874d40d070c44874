/* forkgate: children forked from a process whose probe sites the kernel has
 * optimized, each held before libcptrace's fork repair until a recorder has
 * patched its copy of the site: the workload of ForkSafety.Gate*.
 *
 *   forkgate --lib PATH --children N [--events K] [--stall-ms M]
 *            [--hit-after-signal] [--serial]
 *            [--recorder-file PATH --stop-recorder-at I] [--exec-every E]
 *            [--hit-delay-us D]
 *
 * libcptrace is loaded with dlopen, after this program registered its own
 * atfork child handler: that handler runs before the library's repair and
 * waits (at most M ms, default 500) until the first byte of the child's copy
 * of cp_logTS's site is no longer the call the parent's optimized uprobe left,
 * i.e. until a recorder that follows the child has written its int3 over it.
 * So the repair meets the worst bytes a child can hold, every time, instead of
 * only when the child happens to run late.
 *
 * The program prints "READY <pid>" and waits for SIGUSR1. It then logs K events
 * on channel "gate" (tuples 0..K-1: its site gets optimized) and forks N
 * children. Each child logs K events on channel "child" (tuples i*K..i*K+K-1)
 * and ends with _exit(0); every E-th child (E > 0) execs this program instead,
 * which logs one event on "child.exec" and exits. With --hit-after-signal the
 * children wait until the parent, after all of them were through fork() and
 * it printed "FORKED", got SIGUSR2 (the test stops the recorder in between):
 * their first hit comes after the detach.
 * With --serial the parent forks the next child only once the last one is
 * through fork() (a recorder attaches to one new process at a time, each
 * attach costing more the more processes map the library). With
 * --recorder-file, the parent reads a pid from PATH once let go and sends
 * SIGINT to it before forking child I: the detach races the children being
 * forked and repaired.
 *
 * With --hit-delay-us each child sleeps a pseudo-random 0..D-1 us between
 * fork() and its first event, so a detach lands between the two more often.
 *
 * At the end one JSON line: {"pid":P,"children":N,"ok":X,"killed":K,"sigill":L,
 * "int3_over_call":C,"stall_timeouts":T,"parent_call":P} where killed counts
 * the children ended by a signal (sigill those by SIGILL), int3_over_call the
 * children whose site held an int3 followed by the call's displacement when
 * they reached the repair, stall_timeouts those whose site was still the call
 * after M ms, and parent_call is 1 if the parent's site was the kernel's call.
 * Exit status 0 only if every child exited with status 0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cptrace_probe_site.h"

typedef uint64_t (*open_fn)(const char *);
typedef void (*log_fn)(uint64_t, uint64_t);

static open_fn open_channel;
static log_fn log_ts;
static const volatile uint8_t *site;
static unsigned stall_ms = 500;
static unsigned *shared; /* with the children: [0] int3 over the call, [1] waits that timed out */

static const uint8_t nop5[CP_SITE_NOP_LEN] = {CP_SITE_NOP_BYTES};

/* Runs in the child before libcptrace's repair (registered first). */
static void stall_child(void)
{
	if (!site)
		return;
	struct timespec step = {0, 100 * 1000};
	for (unsigned i = 0; i < stall_ms * 10 && site[0] == 0xe8; i++)
		nanosleep(&step, NULL);
	if (site[0] == 0xe8)
		__atomic_fetch_add(&shared[1], 1, __ATOMIC_RELAXED);
	else if (site[0] == 0xcc && memcmp((const void *)(site + 1), nop5 + 1, CP_SITE_NOP_LEN - 1) != 0)
		__atomic_fetch_add(&shared[0], 1, __ATOMIC_RELAXED);
}

static void wait_signal(int sig)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	int got;
	sigwait(&set, &got);
}

static int arg_is(const char *a, const char *name)
{
	return strcmp(a, name) == 0;
}

static void load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "forkgate: %s\n", dlerror());
		exit(2);
	}
	open_channel = (open_fn)dlsym(h, "cp_open_channel");
	log_ts = (log_fn)dlsym(h, "cp_logTS");
	if (!open_channel || !log_ts) {
		fprintf(stderr, "forkgate: %s lacks cp_open_channel or cp_logTS\n", lib);
		exit(2);
	}
	/* The site behind cp_logTS (a library before the split has none). */
	const void *at = dlsym(h, "cp_logTS_site");
	site = (const volatile uint8_t *)(at ? at : (const void *)log_ts) + CP_SITE_NOP_OFFSET;
}

int main(int argc, char **argv)
{
	const char *lib = NULL, *recorder_file = NULL;
	unsigned children = 0, exec_every = 0, stop_at = 0, hit_delay_us = 0;
	uint64_t events = 5;
	pid_t recorder = 0;
	int hit_after_signal = 0, serial = 0;
	for (int i = 1; i < argc; i++) {
		if (arg_is(argv[i], "--hit-after-signal")) {
			hit_after_signal = 1;
			continue;
		}
		if (arg_is(argv[i], "--serial")) {
			serial = 1;
			continue;
		}
		if (arg_is(argv[i], "--exec-child") && i + 1 < argc) { /* an exec'd child */
			load(argv[i + 1]);
			log_ts(open_channel("child.exec"), 0);
			return 0;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "forkgate: %s needs a value\n", argv[i]);
			return 2;
		}
		const char *v = argv[++i];
		if (arg_is(argv[i - 1], "--lib"))
			lib = v;
		else if (arg_is(argv[i - 1], "--children"))
			children = (unsigned)strtoul(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--events"))
			events = strtoull(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--stall-ms"))
			stall_ms = (unsigned)strtoul(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--recorder-file"))
			recorder_file = v;
		else if (arg_is(argv[i - 1], "--stop-recorder-at"))
			stop_at = (unsigned)strtoul(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--hit-delay-us"))
			hit_delay_us = (unsigned)strtoul(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--exec-every"))
			exec_every = (unsigned)strtoul(v, NULL, 10);
		else {
			fprintf(stderr, "forkgate: unknown option %s\n", argv[i - 1]);
			return 2;
		}
	}
	if (!lib) {
		fprintf(stderr, "forkgate: --lib PATH is required\n");
		return 2;
	}
	shared = mmap(NULL, 2 * sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return 2;
	/* Before the library: its own child handler (the repair) runs after ours. */
	pthread_atfork(NULL, NULL, stall_child);
	load(lib);

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("READY %d\n", (int)getpid());
	fflush(stdout);
	wait_signal(SIGUSR1);
	if (recorder_file) {
		FILE *f = fopen(recorder_file, "r");
		if (!f || fscanf(f, "%d", &recorder) != 1 || recorder <= 0) {
			fprintf(stderr, "forkgate: no recorder pid in %s\n", recorder_file);
			return 2;
		}
		fclose(f);
	}

	uint64_t gate = open_channel("gate");
	for (uint64_t t = 0; t < events; t++)
		log_ts(gate, t);
	int parent_call = site[0] == 0xe8;

	int release[2], ready[2];
	if (pipe(release) != 0 || pipe(ready) != 0)
		return 2;
	pid_t *pids = calloc(children ? children : 1, sizeof(pid_t));
	for (unsigned c = 0; c < children; c++) {
		if (recorder && c == stop_at)
			kill(recorder, SIGINT);
		pids[c] = fork();
		if (pids[c] != 0) {
			char b;
			if (serial && pids[c] > 0)
				(void)!read(ready[0], &b, 1);
			continue;
		}
		close(release[1]);
		char b = 1;
		if (hit_after_signal || serial)
			(void)!write(ready[1], &b, 1); /* repaired, and followed if the recorder follows */
		if (hit_after_signal)
			(void)!read(release[0], &b, 1); /* EOF: the parent let go */
		if (hit_delay_us)
			usleep((c * 2654435761u) % hit_delay_us);
		if (exec_every && c % exec_every == exec_every - 1) {
			execl("/proc/self/exe", argv[0], "--exec-child", lib, (char *)NULL);
			_exit(4);
		}
		uint64_t ch = open_channel("child");
		for (uint64_t t = 0; t < events; t++)
			log_ts(ch, c * events + t);
		_exit(0);
	}
	close(ready[1]);
	for (unsigned c = 0; hit_after_signal && !serial && c < children; c++) {
		char b;
		if (read(ready[0], &b, 1) != 1)
			break;
	}
	printf("FORKED\n");
	fflush(stdout);
	if (hit_after_signal)
		wait_signal(SIGUSR2);
	close(release[1]);

	unsigned ok = 0, killed = 0, sigill = 0;
	for (unsigned c = 0; c < children; c++) {
		int status = 0;
		if (pids[c] <= 0 || waitpid(pids[c], &status, 0) != pids[c])
			continue;
		ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
		killed += WIFSIGNALED(status);
		sigill += WIFSIGNALED(status) && WTERMSIG(status) == SIGILL;
	}
	printf("{\"pid\":%d,\"children\":%u,\"ok\":%u,\"killed\":%u,\"sigill\":%u,\"int3_over_call\":%u,"
	       "\"stall_timeouts\":%u,\"parent_call\":%d}\n",
	       (int)getpid(), children, ok, killed, sigill, shared[0], shared[1], parent_call);
	return ok == children ? 0 : 1;
}
