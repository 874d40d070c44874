/* The hello: a process that loads libcptrace tells a recorder that must record
 * it, and waits until that recorder has attached to this library.
 *
 * Why not a file: a process in a container has its own mount namespace (its
 * own /run) and pid namespace, so no path and no pid both sides can name. A
 * system call is seen by the kernel whatever the namespaces: prctl with
 * PR_GET_DUMPABLE, an option every kernel knows and that reads no argument,
 * carrying CP_HELLO_PRCTL and the struct's address (include/cptrace_records.h;
 * not an unknown option: a seccomp profile may kill a process for one); a
 * recorder that must record this process has a BPF program on
 * its tracepoint that sends this thread CP_HELLO_SIGNAL before the call
 * returns (blocked here, so it only becomes pending, and is taken back), and
 * tells the recorder where our library is. The recorder attaches to the file
 * holding `site` and writes CP_HELLO_ATTACHED into our memory by our host
 * pid. With no recorder the cost is five system calls (about 2 us, measured by
 * bench/). The wait is bounded (CP_HELLO_WAIT_MS): a recorder that dies
 * meanwhile does not hang us.
 *
 * Only system calls here: a forked child of a threaded program may call no
 * more than that. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cp_internal.h"

#define CP_HELLO_WAIT_MS 1000

extern const uintptr_t __start_cp_probe_sites[] __attribute__((visibility("hidden")));
extern const uintptr_t __stop_cp_probe_sites[] __attribute__((visibility("hidden")));

/* Written by the recorder, from outside: volatile. */
static volatile struct cp_hello hello;

/* Says hello with the signal blocked; 1 if a recorder answered. A signal of
 * that number sent by anyone else meanwhile is raised again for later, and one
 * pending already leaves us silent (we could not tell the two apart). */
static int cp_hello_signalled(void)
{
	sigset_t sig, old, pending;
	sigemptyset(&sig);
	sigaddset(&sig, CP_HELLO_SIGNAL);
	int saved = errno; /* the program's, in a forked child */
	if (sigprocmask(SIG_BLOCK, &sig, &old) != 0)
		return 0;
	int answered = 0;
	if (sigpending(&pending) == 0 && !sigismember(&pending, CP_HELLO_SIGNAL)) {
		(void)syscall(SYS_prctl, CP_HELLO_CARRIER, CP_HELLO_PRCTL, (unsigned long)&hello, 0UL, 0UL);
		siginfo_t si;
		struct timespec now = {0, 0};
		if (sigtimedwait(&sig, &si, &now) == CP_HELLO_SIGNAL) {
			answered = si.si_code == SI_KERNEL;
			if (!answered)
				(void)syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid),
					      CP_HELLO_SIGNAL);
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return answered;
}

CP_HIDDEN int cp_hello_recorder(void)
{
	const uintptr_t *first = __start_cp_probe_sites, *end = __stop_cp_probe_sites;
	if (first == end)
		return 0;
	hello.magic = CP_HELLO_MAGIC;
	hello.site = (__u64)*first;
	hello.version = CP_HELLO_VERSION;
	hello.state = CP_HELLO_NONE;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!cp_hello_signalled())
		return 0;
	struct timespec step = {0, 100 * 1000};
	for (int i = 0; i < CP_HELLO_WAIT_MS * 10 && hello.state != CP_HELLO_ATTACHED; i++)
		nanosleep(&step, NULL);
	return 1; /* attached, or a recorder that never came: no follow mark to wait for either */
}
