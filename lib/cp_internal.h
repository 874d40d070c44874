/* Internal declarations shared by the files of libcptrace. */
#ifndef CP_INTERNAL_H
#define CP_INTERNAL_H

#include <stdint.h>

#include "cptrace.h"
#include "cptrace_records.h"

#define CP_HIDDEN __attribute__((visibility("hidden")))

/* registry.c: records `id` -> `name` (once per id; reopening clears `closed`)
 * and returns the stored, NUL-terminated name, or NULL when the registry is
 * full. */
CP_HIDDEN const char *cp_registry_add(uint64_t id, const char *name);
CP_HIDDEN void cp_registry_mark_closed(uint64_t id);

#endif
