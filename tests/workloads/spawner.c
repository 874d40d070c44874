/* spawner: starts copies of itself the three ways a program starts another,
 * for the process-tree tests of `record`.
 *
 *   spawner [--children N] [--events E]       the parent
 *   spawner --child E                         a started copy
 *
 * The parent opens channel "spawner", logs E events, then starts N copies by
 * fork()+execv(), N by posix_spawn() and N by vfork()+execv(), waits for all,
 * logs E more and prints {"pid":P,"started":3N,"failed":F}. A copy opens
 * channel "spawned", logs E events (tuples 0..E-1) and exits 0. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cptrace.h"

extern char **environ;

static void log_n(const char *channel, uint64_t n)
{
	uint64_t ch = cp_open_channel(channel);
	for (uint64_t i = 0; i < n; i++)
		cp_logTS(ch, i);
}

static pid_t start(int how, char *const argv[])
{
	pid_t pid = -1;
	if (how == 0) {
		pid = fork();
		if (pid == 0) {
			execv("/proc/self/exe", argv);
			_exit(127);
		}
	} else if (how == 1) {
		if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0)
			pid = -1;
	} else {
		pid = vfork();
		if (pid == 0) {
			execv("/proc/self/exe", argv);
			_exit(127);
		}
	}
	return pid;
}

int main(int argc, char **argv)
{
	unsigned children = 2;
	char *events = "20";
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--child") == 0) {
			log_n("spawned", strtoull(argv[i + 1], NULL, 10));
			return 0;
		}
		if (strcmp(argv[i], "--children") == 0)
			children = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--events") == 0)
			events = argv[i + 1];
	}
	uint64_t e = strtoull(events, NULL, 10);
	log_n("spawner", e);
	char *child_argv[] = {argv[0], "--child", events, NULL};
	unsigned started = 0, failed = 0;
	for (int how = 0; how < 3; how++)
		for (unsigned c = 0; c < children; c++) {
			int status = 0;
			pid_t pid = start(how, child_argv);
			started++;
			failed += pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
				  WEXITSTATUS(status) != 0;
		}
	uint64_t ch = cp_open_channel("spawner");
	for (uint64_t i = e; i < 2 * e; i++)
		cp_logTS(ch, i);
	printf("{\"pid\":%d,\"started\":%u,\"failed\":%u}\n", (int)getpid(), started, failed);
	return failed != 0;
}
