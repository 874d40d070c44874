/* Where cp_logTS (batch.c) sends one event: its own probe site, or the
 * thread's buffer.
 *
 * The buffer is the cheaper path on every kernel: an event costs an rdtscp
 * (the stamp and its CPU) and a store (~25-50 ns with the shared hit), and one
 * probe hit is shared by CP_BATCH_MAX events.
 * The site costs a hit per event: ~0.3-1.5 us where the kernel optimizes a
 * nop5 uprobe (x86-64 Linux 6.18+), 12-50 us (an int3 trap and a single-step)
 * before that. So single events are buffered by default, stamped as
 * cp_logTS_batch's are, handed over CP_BATCH_MAX at a time and by the flusher
 * thread within CP_FLUSH_DELAY_MS * 2 when the thread goes quiet
 * (buffer_flusher.c).
 *
 * What the site gives that the buffer does not: delivery at once (not within
 * 0.1 s), no flusher thread in the process, and a first call that is
 * async-signal-safe (the buffer's first one mallocs). A program that needs one
 * of those sets CPTRACE_SINGLE=site. The choice is made once, at load:
 *   site    always the probe site (one hit per event, delivered at once)
 *   buffer  always the buffer
 *   auto    (or unset, or any other value) the buffer
 * docs/record.md ("Single events") says what each costs. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "cp_internal.h"

CP_HIDDEN int cp_single_buffered;

static int choose_buffered(void)
{
	const char *mode = getenv("CPTRACE_SINGLE");
	return !(mode && !strcmp(mode, "site"));
}

__attribute__((constructor)) static void single_route_init(void)
{
	cp_single_buffered = choose_buffered();
}
