/* bench_hello: what the hello (docs/record.md#the-hello) costs a process.
 *
 *   bench_hello [--n N]
 *
 * Linked with libcptrace: each fork()'s child runs the library's child handler,
 * which says hello. Prints the mean time of fork + the child's _exit + waitpid,
 * in microseconds, over N forks. Run it alone and under `cptrace record --all`
 * (every child then waits for the recorder's answer) and compare; or under
 * `cptrace record -- bench_hello` (the child waits for the attach). Also the
 * hello's system calls alone, as a process no recorder answers makes them
 * (ns per hello). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cptrace.h>
#include <cptrace_records.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* lib/recorder_hello.c's system calls, unanswered (prctl PR_GET_DUMPABLE carrying the hello). */
static double hello_syscalls_ns(long n)
{
	sigset_t sig, old, pending;
	sigemptyset(&sig);
	sigaddset(&sig, CP_HELLO_SIGNAL);
	struct cp_hello h = {.magic = 0}; /* a wrong magic: no recorder answers it */
	siginfo_t si;
	struct timespec zero = {0, 0};
	double t0 = now_us();
	for (long i = 0; i < n; i++) {
		sigprocmask(SIG_BLOCK, &sig, &old);
		sigpending(&pending);
		syscall(SYS_prctl, CP_HELLO_CARRIER, CP_HELLO_PRCTL, (unsigned long)&h, 0UL, 0UL);
		sigtimedwait(&sig, &si, &zero);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	return (now_us() - t0) * 1e3 / (double)n;
}

int main(int argc, char **argv)
{
	long n = 500;
	for (int i = 1; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--n"))
			n = atol(argv[i + 1]);
	uint64_t ch = cp_open_channel("bench_hello");
	double t0 = now_us();
	for (long i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		if (p < 0 || waitpid(p, NULL, 0) != p) {
			perror("fork");
			return 1;
		}
	}
	double per = (now_us() - t0) / (double)n;
	cp_close_channel(ch);
	printf("forks=%ld us/fork=%.1f hello_syscalls_ns=%.0f\n", n, per, hello_syscalls_ns(100000));
	return 0;
}
