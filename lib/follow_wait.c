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
 * The recorder says whom it follows, attached, with one file per process in
 * CP_FOLLOW_DIR, holding the recorder's own pid. The file is named
 * "<pid namespace inode>.<pid in that namespace>": a process in a container
 * (its own pid namespace) knows only its pids there, and both sides can name
 * it so; the recorder also writes the plain host pid (libraries built before).
 * Whether the recorder still runs: it holds a lock on CP_FOLLOW_DIR/
 * recorder.<its pid> (seen from any pid namespace, where kill() cannot see
 * the recorder); without that file, kill(pid, 0). A file left by a killed
 * recorder costs nothing. Without such a file (no recorder, --no-inherit,
 * --lib, a container with its own /run) this is one or two failed open()s.
 * Only system calls here: a forked child of a threaded program may call no
 * more than that. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cp_internal.h"

#define CP_FOLLOW_WAIT_MS 1000

/* Appends the decimal digits of v at out[*at], without snprintf (not
 * async-signal-safe). */
static void put_decimal(char *out, size_t size, size_t *at, unsigned long long v)
{
	char digits[24];
	int n = 0;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0 && n < (int)sizeof(digits));
	while (n > 0 && *at + 1 < size)
		out[(*at)++] = digits[--n];
	out[*at] = '\0';
}

static void put_text(char *out, size_t size, size_t *at, const char *s)
{
	for (; *s && *at + 1 < size; s++)
		out[(*at)++] = *s;
	out[*at] = '\0';
}

/* CP_FOLLOW_DIR "/<pidns>.<pid>", or "/<pid>" where /proc does not tell our
 * pid namespace. */
static void follow_path(char *out, size_t size, pid_t pid)
{
	struct stat ns;
	size_t at = 0;
	put_text(out, size, &at, CP_FOLLOW_DIR "/");
	if (stat("/proc/self/ns/pid", &ns) == 0) {
		put_decimal(out, size, &at, (unsigned long long)ns.st_ino);
		put_text(out, size, &at, ".");
	}
	put_decimal(out, size, &at, (unsigned long long)pid);
}

/* 1 while the recorder of that pid runs (its lock is held), 0 when it is gone. */
static int recorder_running(long recorder)
{
	char path[64];
	size_t at = 0;
	put_text(path, sizeof(path), &at, CP_FOLLOW_DIR "/recorder.");
	put_decimal(path, sizeof(path), &at, (unsigned long long)recorder);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return kill((pid_t)recorder, 0) == 0 || errno != ESRCH;
	struct flock lk = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
	int held = fcntl(fd, F_OFD_GETLK, &lk) == 0 && lk.l_type != F_UNLCK;
	close(fd);
	return held;
}

/* 1 if a live recorder follows `pid` (a pid of our own namespace). */
static int followed(pid_t pid)
{
	char path[96], buf[16];
	if (pid <= 0)
		return 0; /* getppid(): a parent outside our pid namespace */
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
	return recorder_running(recorder);
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
