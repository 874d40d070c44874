/* A new process of a recorded tree waits until its recorder has attached to it.
 *
 * `cptrace record -p PID / -- CMD` attaches its uprobes to each process only
 * (a process outside the tree is never patched), so a child is recorded only
 * once the recorder, told of the fork by the kernel, has attached to the
 * child's pid: a few milliseconds after fork() returned. The events of those
 * milliseconds would be lost without a count. So a child whose parent (or
 * itself) is followed waits here, in fork()'s atfork child handler and at load,
 * until the recorder says it has attached to it, for at most CP_FOLLOW_WAIT_MS.
 *
 * The recorder says whom it follows, attached, with one file per process,
 * CP_FOLLOW_DIR/<pid>, holding the recorder's own pid: a file left by a killed
 * recorder is recognised by that pid being gone, and costs nothing. Without
 * such a file (no recorder, --no-inherit, --lib) this is one failed open().
 * Only system calls here: a forked child of a threaded program may call no
 * more than that. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "cp_internal.h"

#define CP_FOLLOW_WAIT_MS 1000

/* "/run/cptrace/follow/" + decimal pid, without snprintf (not async-signal-safe). */
static void follow_path(char *out, size_t size, pid_t pid)
{
	static const char dir[] = CP_FOLLOW_DIR "/";
	char digits[16];
	int n = 0;
	do {
		digits[n++] = (char)('0' + pid % 10);
		pid /= 10;
	} while (pid > 0 && n < (int)sizeof(digits));
	size_t at = 0;
	for (; dir[at] && at + 1 < size; at++)
		out[at] = dir[at];
	while (n > 0 && at + 1 < size)
		out[at++] = digits[--n];
	out[at] = '\0';
}

/* 1 if a live recorder follows `pid`. */
static int followed(pid_t pid)
{
	char path[64], buf[16];
	follow_path(path, sizeof(path), pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	long recorder = 0;
	for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		recorder = recorder * 10 + (buf[i] - '0');
	if (recorder <= 0)
		return 0;
	return kill((pid_t)recorder, 0) == 0 || errno != ESRCH;
}

CP_HIDDEN int cp_follow_expected(void)
{
	return !followed(getpid()) && followed(getppid());
}

/* Our own file appears once the recorder has attached to us, programs
 * included (a breakpoint alone is not enough: the kernel installs it before
 * the program is on it). Every 10 ms: is the parent still followed? A recorder
 * that stops meanwhile does not keep us waiting. */
CP_HIDDEN void cp_follow_wait(void)
{
	struct timespec step = {0, 200 * 1000};
	pid_t self = getpid(), parent = getppid();
	for (int i = 1; i <= CP_FOLLOW_WAIT_MS * 5; i++) {
		if (followed(self) || (i % 50 == 0 && !followed(parent)))
			return;
		nanosleep(&step, NULL);
	}
}
