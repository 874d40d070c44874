/* exit_paths: processes that end with events still in thread buffers, for the
 * "nothing lost at exit" tests of `record`.
 *
 *   exit_paths [--events E]
 *
 * Starts four processes, one per ending, each with a channel of its own. In
 * each, the main thread and 3 other threads log E events each through
 * cp_logTS_batch (E not a multiple of 256 leaves a partly full buffer), then
 * the other threads park (never flushing) and the process ends:
 *   "exit"  : exit(0) from main (its own buffer is flushed by the library)
 *   "_exit" : _exit(0)
 *   "term"  : raise(SIGTERM), default action
 *   "kill"  : SIGKILL from the parent, while everything is parked
 * A fifth process, "joined", has its threads return without cp_flush and be
 * joined before exit(0). The parent prints one JSON line:
 *   {"emitted":{"exit":N,...},"failed":F}   (F: children that ended otherwise) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cptrace.h"

#define THREADS 3

static uint64_t events = 1000;
static uint64_t channel;
static atomic_int logged;
static int park;

static void log_events(void)
{
	for (uint64_t i = 0; i < events; i++)
		cp_logTS_batch(channel, i);
}

static void *worker(void *arg)
{
	(void)arg;
	log_events();
	atomic_fetch_add(&logged, 1);
	while (park)
		pause();
	return NULL;
}

/* Runs in the child; `ready` (shared) is set once every thread has logged. */
static void child(const char *name, atomic_int *ready)
{
	channel = cp_open_channel(name);
	park = strcmp(name, "joined") != 0;
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	log_events();
	while (atomic_load(&logged) < THREADS)
		usleep(1000);
	if (!park) {
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		exit(0);
	}
	atomic_store(ready, 1);
	if (strcmp(name, "exit") == 0)
		exit(0);
	if (strcmp(name, "_exit") == 0)
		_exit(0);
	if (strcmp(name, "term") == 0)
		raise(SIGTERM);
	for (;;)
		pause(); /* "kill": the parent kills us here */
}

static int ended_as_expected(const char *name, int status)
{
	if (strcmp(name, "term") == 0)
		return WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
	if (strcmp(name, "kill") == 0)
		return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2)
		if (strcmp(argv[i], "--events") == 0)
			events = strtoull(argv[i + 1], NULL, 10);
	static const char *names[] = {"exit", "_exit", "term", "kill", "joined"};
	const int n = sizeof(names) / sizeof(names[0]);
	atomic_int *ready = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ready == MAP_FAILED)
		return 2;
	int failed = 0;
	printf("{\"emitted\":{");
	for (int c = 0; c < n; c++) {
		atomic_store(ready, 0);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			child(names[c], ready);
		if (strcmp(names[c], "kill") == 0) {
			while (!atomic_load(ready))
				usleep(1000);
			kill(pid, SIGKILL);
		}
		int status = 0;
		failed += waitpid(pid, &status, 0) != pid || !ended_as_expected(names[c], status);
		printf("%s\"%s\":%llu", c ? "," : "", names[c], (unsigned long long)((THREADS + 1) * events));
	}
	printf("},\"failed\":%d}\n", failed);
	return failed != 0;
}
