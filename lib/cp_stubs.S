/* Probe sites of libcptrace.
 *
 * Every symbol here is a place the recorder attaches a uprobe to, by name; each
 * is a TSC stamp into rax, then `nop5; ret` (lib/probe_site.h says why). */
#include "probe_site.h"

	.text

/* void cp_logTS_site(uint64_t channel, uint64_t tuple_id): where cp_logTS
 * (single_route.c) sends an event that is not buffered */
	CP_PROBE_SITE cp_logTS_site
/* void cp_batch_submit(const struct cp_batch_entry *e, uint32_t n, const uint32_t *count_at) */
	CP_PROBE_SITE cp_batch_submit
/* void cp_batch_submit_for(const struct cp_batch_entry *e, uint32_t n, const uint32_t *count_at,
 *                          uint32_t tid) */
	CP_PROBE_SITE cp_batch_submit_for
/* void cp_channel_announce(uint64_t id, const char *name) */
	CP_PROBE_SITE cp_channel_announce
/* void cp_channel_closed(uint64_t id) */
	CP_PROBE_SITE cp_channel_closed

/* Registered here, not with __attribute__((constructor)) in fork_safe.c: a
 * program linked with libcptrace.a pulls this object (its cp_logTS calls
 * cp_logTS_site), and through this reference fork_safe.o with it. */
	.section .init_array, "aw"
	.balign 8
	.quad	cp_fork_safe_init

	.section .note.GNU-stack, "", @progbits
