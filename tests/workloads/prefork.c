/* prefork: a pre-fork server, the workload of the fork-safety tests.
 *
 *   prefork [--rounds R] [--workers N] [--events E] [--pace-ms M] [--wait-signal]
 *
 * The parent opens channel "server" and, each round, logs E events through
 * cp_logTS and E through cp_logTS_batch (+ cp_flush), then forks N workers and
 * waits for them. A worker opens "worker", logs the same way, forks a child that
 * does the same and ends with _exit, and ends (even workers with exit, odd ones
 * with _exit) with status 3 if its child did not end with status 0. Then the
 * parent sleeps M ms. With --wait-signal the parent prints "READY <pid>" and
 * waits for SIGUSR1 before the first round.
 *
 * Parent tuple ids are 0, 1, 2, ...: it emits 2*E*R of them. At the end one JSON
 * line: {"pid":P,"parent_emitted":X,"children":C,"failed":F} where F counts the
 * workers (and, through status 3, their children) that did not end cleanly;
 * exit status 0 only if F is 0. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cptrace.h"

static unsigned rounds = 10, workers = 4, pace_ms = 0;
static uint64_t events = 100;

static void log_both(uint64_t ch, uint64_t *tuple)
{
	for (uint64_t i = 0; i < events; i++)
		cp_logTS(ch, (*tuple)++);
	for (uint64_t i = 0; i < events; i++)
		cp_logTS_batch(ch, (*tuple)++);
	cp_flush();
}

static int child_ok(pid_t pid)
{
	int status = 0;
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void worker(unsigned index)
{
	uint64_t ch = cp_open_channel("worker");
	uint64_t tuple = 0;
	log_both(ch, &tuple);
	pid_t pid = fork();
	if (pid == 0) {
		uint64_t t2 = 0;
		log_both(cp_open_channel("worker.child"), &t2);
		_exit(0);
	}
	int status = child_ok(pid) ? 0 : 3;
	log_both(ch, &tuple);
	if (index % 2)
		_exit(status);
	exit(status);
}

static int arg_is(const char *a, const char *name)
{
	return strcmp(a, name) == 0;
}

int main(int argc, char **argv)
{
	int wait_signal = 0;
	for (int i = 1; i < argc; i++) {
		if (arg_is(argv[i], "--wait-signal")) {
			wait_signal = 1;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "prefork: %s needs a value\n", argv[i]);
			return 2;
		}
		const char *v = argv[++i];
		if (arg_is(argv[i - 1], "--rounds"))
			rounds = (unsigned)strtoul(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--workers"))
			workers = (unsigned)strtoul(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--events"))
			events = strtoull(v, NULL, 10);
		else if (arg_is(argv[i - 1], "--pace-ms"))
			pace_ms = (unsigned)strtoul(v, NULL, 10);
		else {
			fprintf(stderr, "prefork: unknown option %s\n", argv[i - 1]);
			return 2;
		}
	}
	if (wait_signal) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("READY %d\n", (int)getpid());
		fflush(stdout);
		int sig;
		sigwait(&set, &sig);
	}
	uint64_t ch = cp_open_channel("server");
	uint64_t tuple = 0;
	unsigned children = 0, failed = 0;
	for (unsigned r = 0; r < rounds; r++) {
		log_both(ch, &tuple);
		pid_t pids[64];
		unsigned n = workers < 64 ? workers : 64;
		for (unsigned w = 0; w < n; w++) {
			fflush(stdout);
			pids[w] = fork();
			if (pids[w] == 0)
				worker(w);
		}
		for (unsigned w = 0; w < n; w++) {
			children += 2;
			failed += !child_ok(pids[w]);
		}
		if (pace_ms)
			usleep(pace_ms * 1000);
	}
	cp_close_channel(ch);
	printf("{\"pid\":%d,\"parent_emitted\":%llu,\"children\":%u,\"failed\":%u}\n", (int)getpid(),
	       (unsigned long long)tuple, children, failed);
	return failed ? 1 : 0;
}
