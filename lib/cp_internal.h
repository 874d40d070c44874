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

/* follow_wait.c: where `cptrace record` lists the processes it follows. */
#define CP_FOLLOW_DIR "/run/cptrace/follow"
/* 1 if a live recorder follows the parent but is not attached to us yet. */
CP_HIDDEN int cp_follow_expected(void);
/* Waits (bounded) until the recorder is attached to this process. */
CP_HIDDEN void cp_follow_wait(void);

/* recorder_hello.c: tells a recorder that must record us that we loaded the
 * library, and waits (bounded) until it attached. 1 when a recorder answered
 * (no need to look for a follow mark), 0 when none did. */
CP_HIDDEN int cp_hello_recorder(void);

#endif
