/* Channel open/close: naming probe points and telling the recorder about it. */
#include <string.h>

#include "cp_internal.h"

uint64_t cp_open_channel(const char *name)
{
	if (!name)
		name = "";
	uint64_t id = cp_channel_id(name);
	const char *stored = cp_registry_add(id, name);
	/* Registry full: still announce, from a truncated copy, so an attached
	 * recorder does not lose the name. */
	char local[CP_CHANNEL_NAME_MAX];
	if (!stored) {
		strncpy(local, name, sizeof(local) - 1);
		local[sizeof(local) - 1] = '\0';
		stored = local;
	}
	/* The registry copy rather than the caller's string: it is bounded,
	 * NUL-terminated and in memory we have written, i.e. resident, which the
	 * BPF program's non-faulting read needs. */
	cp_channel_announce(id, stored);
	return id;
}

void cp_close_channel(uint64_t channel)
{
	/* Buffered events of this thread come before the close in the trace. */
	cp_flush();
	cp_channel_closed(channel);
	cp_registry_mark_closed(channel);
}
