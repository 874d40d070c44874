/* Where cp_logTS (batch.c) sends one event: its own probe site, or the
 * thread's buffer.
 *
 * A probe hit on the site's nop5 is cheap only where the kernel optimizes it
 * (x86-64 Linux 6.18+: ~0.3-1.5 us). Before that every hit is an int3 trap and
 * a single-step, 12-50 us: a program logging 100 k events/s would spend its
 * whole CPU there. So on those kernels a single event goes into the calling
 * thread's buffer, as cp_logTS_batch's do (stamped the same way, handed over
 * CP_BATCH_MAX at a time, and by the flusher thread within
 * CP_FLUSH_DELAY_MS * 2 when the thread goes quiet: buffer_flusher.c).
 *
 * The choice is made once, at load, from CPTRACE_SINGLE:
 *   site    always the probe site (one hit per event, delivered at once)
 *   buffer  always the buffer
 *   auto    (or unset) the buffer where the kernel is older than 6.18
 * docs/record.md ("Single events") says what each costs. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "cp_internal.h"

CP_HIDDEN int cp_single_buffered;

/* 1 when `release` ("6.1.0-31-amd64", "6.18.2") is older than 6.18, the
 * first kernel that optimizes uprobes on a nop5. Unparsable: not older. */
static int kernel_before_6_18(const char *release)
{
	unsigned major = 0, minor = 0;
	if (sscanf(release, "%u.%u", &major, &minor) != 2)
		return 0;
	return major < 6 || (major == 6 && minor < 18);
}

static int choose_buffered(void)
{
	const char *mode = getenv("CPTRACE_SINGLE");
	if (mode && !strcmp(mode, "site"))
		return 0;
	if (mode && !strcmp(mode, "buffer"))
		return 1;
	struct utsname u;
	return uname(&u) == 0 && kernel_before_6_18(u.release);
}

__attribute__((constructor)) static void single_route_init(void)
{
	cp_single_buffered = choose_buffered();
}
