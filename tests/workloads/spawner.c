/* spawner: starts copies of itself the three ways a program starts another,
 * for the process-tree tests of `record`.
 *
 *   spawner [--children N] [--events E] [--udp PORT]   the parent
 *   spawner --child E [--udp PORT]                      a started copy
 *
 * The parent opens channel "spawner", logs E events, then starts N copies by
 * fork()+execv(), N by posix_spawn() and N by vfork()+execv(), waits for all,
 * logs E more and prints {"pid":P,"started":3N,"failed":F}. A copy opens
 * channel "spawned", logs E events (tuples 0..E-1) and exits 0. With --udp,
 * every process also sends 3 datagrams of 100 bytes to 127.0.0.1:PORT. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
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

static void send_udp(int port)
{
	if (port <= 0)
		return;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	char buf[100] = {0};
	for (int i = 0; fd >= 0 && i < 3; i++)
		sendto(fd, buf, sizeof(buf), 0, (struct sockaddr *)&to, sizeof(to));
	if (fd >= 0)
		close(fd);
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
	char *events = "20", *udp = "0";
	const char *child_events = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--child") == 0)
			child_events = argv[i + 1];
		else if (strcmp(argv[i], "--children") == 0)
			children = (unsigned)strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--events") == 0)
			events = argv[i + 1];
		else if (strcmp(argv[i], "--udp") == 0)
			udp = argv[i + 1];
	}
	if (child_events) {
		log_n("spawned", strtoull(child_events, NULL, 10));
		send_udp(atoi(udp));
		return 0;
	}
	send_udp(atoi(udp));
	uint64_t e = strtoull(events, NULL, 10);
	log_n("spawner", e);
	char *child_argv[] = {argv[0], "--child", events, "--udp", udp, NULL};
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
