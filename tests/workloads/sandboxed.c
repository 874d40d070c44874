/* sandboxed: runs a command under the restrictions runtimes put on programs.
 *
 *   sandboxed [--kill-unknown-prctl] [--block-signals] -- CMD [ARG]...
 *   sandboxed --kill-unknown-prctl --old-hello
 *
 * --kill-unknown-prctl: PR_SET_NO_NEW_PRIVS, then a seccomp filter that kills
 * the process on a prctl option no kernel knows (above the highest one, save
 * Yama's and PR_SET_VMA's), as a strict runtime profile may. --block-signals:
 * every signal blocked (the mask survives the exec). Then CMD is executed.
 * --old-hello: instead, calls prctl with the option older libcptrace said hello
 * with (include/cptrace_records.h): under the filter, it must die of SIGSYS.
 * Exit status: CMD's (exec), 2 on bad usage, 3 if a restriction failed to
 * apply, 4 if --old-hello survived. */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cptrace_records.h"

#define HIGHEST_KNOWN_OPTION 100u /* above every PR_* number but the two below */
#define YAMA_SET_PTRACER 0x59616d61u
#define SET_VMA 0x53564d41u

static int kill_unknown_prctl(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 7),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prctl, 0, 5),
		/* the option's low 32 bits (x86-64 is little-endian) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, HIGHEST_KNOWN_OPTION, 0, 3),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, YAMA_SET_PTRACER, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SET_VMA, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		perror("sandboxed: PR_SET_NO_NEW_PRIVS");
		return -1;
	}
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
		perror("sandboxed: seccomp");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int kill_prctl = 0, block = 0, old_hello = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (!strcmp(argv[i], "--kill-unknown-prctl"))
			kill_prctl = 1;
		else if (!strcmp(argv[i], "--block-signals"))
			block = 1;
		else if (!strcmp(argv[i], "--old-hello"))
			old_hello = 1;
		else {
			fprintf(stderr, "sandboxed: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (!old_hello && i + 1 >= argc) {
		fprintf(stderr,
			"usage: sandboxed [--kill-unknown-prctl] [--block-signals] -- CMD [ARG]...\n");
		return 2;
	}
	if (kill_prctl && kill_unknown_prctl() != 0)
		return 3;
	if (block) {
		sigset_t all;
		sigfillset(&all);
		if (sigprocmask(SIG_BLOCK, &all, NULL) != 0)
			return 3;
	}
	if (old_hello) {
		syscall(SYS_prctl, CP_HELLO_PRCTL, 0UL, 0UL, 0UL, 0UL);
		return 4;
	}
	execvp(argv[i + 1], argv + i + 1);
	perror("sandboxed: exec");
	return 127;
}
