/* The per-process channel registry of libcptrace.
 *
 * Announcements (the cp_channel_announce probe site) reach only a recorder that
 * is already attached. A recorder started later finds the names here instead:
 * libcptrace exports the global `cptrace_registry`, and the recorder locates it
 * through the symbol table of every ELF object mapped in the target process and
 * reads it with process_vm_readv (user/probe/proc_registry.h).
 *
 * Protocol, so a reader in another process needs no lock:
 *  - the header (magic, version, capacity) is written once, when the first
 *    channel is opened; an all-zero header means "no channel opened yet";
 *  - entries are append-only; entry i is complete before `count` becomes > i
 *    (release store), so a reader takes `count` first and then reads
 *    entries[0 .. count);
 *  - after publication only `closed` changes (0 open, 1 closed);
 *  - when entries[] is full, further entries go to a chain of heap chunks
 *    (struct cp_registry_chunk): a chunk's header is complete before its address
 *    is stored (release) into `overflow` or the previous chunk's `next`, and its
 *    entries are published through its own `count` as above. Chunks are never
 *    freed, so a reader follows the chain with the same care as entries[];
 *  - at most CP_REGISTRY_MAX_NAMES names are kept (a program that makes a
 *    name per tuple must not grow without bound): a name beyond them, or one
 *    memory ran out for, is not registered, and `refused` counts the open
 *    (each open of such a name: it is looked up again every time); the name is
 *    still announced to a recorder attached at the time.
 *
 * The layout is x86-64 and fixed by the static assertions below. Shared by
 * lib/ (C) and user/ (C++). */
#ifndef CPTRACE_REGISTRY_H
#define CPTRACE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "cptrace_records.h" /* CP_CHANNEL_NAME_MAX */

#define CP_REGISTRY_MAGIC "CPREG01" /* 8 bytes with the NUL */
#define CP_REGISTRY_VERSION 2	    /* 2: overflow chunks */
#define CP_REGISTRY_CAPACITY 1024   /* entries[] in the object itself */
#define CP_REGISTRY_CHUNK 4096	    /* entries per overflow chunk */
#define CP_REGISTRY_MAX_NAMES (CP_REGISTRY_CAPACITY + 4 * CP_REGISTRY_CHUNK) /* 17408 names, 1.4 MB */
#define CP_REGISTRY_SYMBOL "cptrace_registry"

#ifdef __cplusplus
extern "C" {
#endif

struct cp_registry_entry {
	uint64_t id;	 /* cp_channel_id(name) */
	uint32_t closed; /* 1 after cp_close_channel(id) */
	uint32_t pad;
	char name[CP_CHANNEL_NAME_MAX]; /* NUL-terminated, possibly truncated */
};

struct cp_registry {
	char magic[8];	   /* CP_REGISTRY_MAGIC, or all zero */
	uint32_t version;  /* CP_REGISTRY_VERSION */
	uint32_t capacity; /* number of elements of entries[] */
	uint32_t count;	   /* published entries */
	uint32_t refused;  /* opens of names not registered (full, or out of memory); was padding */
	uint64_t overflow; /* address of the first cp_registry_chunk, or 0 */
	struct cp_registry_entry entries[CP_REGISTRY_CAPACITY];
};

struct cp_registry_chunk {
	uint64_t next;	   /* address of the next chunk, or 0 */
	uint32_t capacity; /* number of elements of entries[] */
	uint32_t count;	   /* published entries */
	struct cp_registry_entry entries[];
};

/* Defined in libcptrace (shared and static). */
extern struct cp_registry cptrace_registry;

#ifdef __cplusplus
}
#define CP_REGISTRY_STATIC_ASSERT static_assert
#else
#define CP_REGISTRY_STATIC_ASSERT _Static_assert
#endif

/* Readers in other processes depend on these offsets. */
CP_REGISTRY_STATIC_ASSERT(sizeof(struct cp_registry_entry) == 16 + CP_CHANNEL_NAME_MAX,
			  "registry entry layout");
CP_REGISTRY_STATIC_ASSERT(offsetof(struct cp_registry, count) == 16, "registry header layout");
CP_REGISTRY_STATIC_ASSERT(offsetof(struct cp_registry, overflow) == 24, "registry header layout");
CP_REGISTRY_STATIC_ASSERT(offsetof(struct cp_registry, entries) == 32, "registry header layout");
CP_REGISTRY_STATIC_ASSERT(offsetof(struct cp_registry_chunk, count) == 12, "registry chunk layout");
CP_REGISTRY_STATIC_ASSERT(offsetof(struct cp_registry_chunk, entries) == 16, "registry chunk layout");

#endif /* CPTRACE_REGISTRY_H */
