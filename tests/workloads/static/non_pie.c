/* A program linked the old way: not position-independent (its code at
 * 0x400000, which /proc/PID/maps prints zero-padded and map_files/ names
 * without the zeros) and with libcptrace.a inside it, so the probe sites are
 * in the executable itself. Prints READY, waits for SIGUSR1 (the recorder
 * attaches meanwhile), logs `events` batch events on "static.log" and prints
 * {"total": N}. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cptrace.h"

static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

int main(int argc, char **argv)
{
	int events = argc > 1 ? atoi(argv[1]) : 1000;
	signal(SIGUSR1, on_usr1);
	uint64_t ch = cp_open_channel("static.log");
	printf("READY\n");
	fflush(stdout);
	while (!go)
		pause();
	for (int i = 0; i < events; i++)
		cp_logTS_batch(ch, (uint64_t)i);
	cp_flush();
	printf("{\"total\":%d}\n", events);
	return 0;
}
