/* The process channel registry (see cptrace_registry.h for the protocol a
 * reader in another process relies on). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cp_internal.h"
#include "cptrace_registry.h"

/* Zero-initialized, so it lives in .bss and costs no file size; the header is
 * filled in when the first channel is opened. Exported: the recorder finds it
 * by name. */
struct cp_registry cptrace_registry;

/* Writers are rare (channel opens), so one lock is enough. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registry_atfork_once = PTHREAD_ONCE_INIT;

/* fork() while another thread opens or closes a channel would leave the child
 * a lock no thread of it releases, and its next open would wait forever: the
 * lock is taken across fork() and released on both sides. */
static void registry_prepare(void)
{
	pthread_mutex_lock(&registry_lock);
}

static void registry_after_fork(void)
{
	pthread_mutex_unlock(&registry_lock);
}

static void registry_register_atfork(void)
{
	pthread_atfork(registry_prepare, registry_after_fork, registry_after_fork);
}

static void registry_lock_acquire(void)
{
	pthread_once(&registry_atfork_once, registry_register_atfork);
	pthread_mutex_lock(&registry_lock);
}

static void registry_init_header_locked(struct cp_registry *r)
{
	if (r->magic[0])
		return;
	r->version = CP_REGISTRY_VERSION;
	r->capacity = CP_REGISTRY_CAPACITY;
	/* Magic last: a reader that sees it sees a complete header. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(r->magic, CP_REGISTRY_MAGIC, sizeof(r->magic));
}

/* The last overflow chunk, where new entries go once entries[] is full. */
static struct cp_registry_chunk *registry_tail;
/* Names registered, in entries[] and the chunks together. */
static uint32_t registry_names;

/* id -> entry, open addressing with linear probing, for this process only
 * (readers in other processes walk entries[] and the chunks): an open or close
 * of a kept name, and of every name past the cap, costs a probe or two instead
 * of a scan of up to CP_REGISTRY_MAX_NAMES entries under the lock. In .bss:
 * only the pages a program's names touch are ever backed. */
#define REGISTRY_INDEX_SLOTS 32768u
_Static_assert(REGISTRY_INDEX_SLOTS > CP_REGISTRY_MAX_NAMES, "a free slot ends every probe");
_Static_assert((REGISTRY_INDEX_SLOTS & (REGISTRY_INDEX_SLOTS - 1)) == 0, "a power of two");
static struct cp_registry_entry *registry_index[REGISTRY_INDEX_SLOTS];

static uint32_t index_slot(uint64_t id)
{
	/* Fibonacci hashing: ids are hashes already, but spread them anyway. */
	return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 49) & (REGISTRY_INDEX_SLOTS - 1);
}

static struct cp_registry_entry *registry_find_locked(uint64_t id)
{
	for (uint32_t i = index_slot(id); registry_index[i]; i = (i + 1) & (REGISTRY_INDEX_SLOTS - 1))
		if (registry_index[i]->id == id)
			return registry_index[i];
	return NULL;
}

static void registry_index_add_locked(struct cp_registry_entry *e)
{
	uint32_t i = index_slot(e->id);
	while (registry_index[i])
		i = (i + 1) & (REGISTRY_INDEX_SLOTS - 1);
	registry_index[i] = e;
}

static void fill_entry(struct cp_registry_entry *e, uint64_t id, const char *name)
{
	e->id = id;
	e->closed = 0;
	strncpy(e->name, name, sizeof(e->name) - 1);
	e->name[sizeof(e->name) - 1] = '\0';
}

/* A new empty chunk linked after the last one (or as the first); NULL when out
 * of memory. Its header is complete before the link is stored. */
static struct cp_registry_chunk *registry_grow_locked(struct cp_registry *r)
{
	struct cp_registry_chunk *c =
		calloc(1, sizeof(*c) + CP_REGISTRY_CHUNK * sizeof(struct cp_registry_entry));
	if (!c)
		return NULL;
	c->capacity = CP_REGISTRY_CHUNK;
	uint64_t *link = registry_tail ? &registry_tail->next : &r->overflow;
	__atomic_store_n(link, (uint64_t)(uintptr_t)c, __ATOMIC_RELEASE);
	registry_tail = c;
	return c;
}

/* A name the registry does not keep, counted for the reader. */
static struct cp_registry_entry *registry_refuse_locked(struct cp_registry *r)
{
	__atomic_store_n(&r->refused, r->refused + 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Fills the next free slot and only then publishes it by bumping count. */
static struct cp_registry_entry *registry_append_locked(struct cp_registry *r, uint64_t id, const char *name)
{
	if (registry_names >= CP_REGISTRY_MAX_NAMES)
		return registry_refuse_locked(r);
	registry_names++;
	uint32_t n = r->count;
	if (n < CP_REGISTRY_CAPACITY) {
		fill_entry(&r->entries[n], id, name);
		__atomic_store_n(&r->count, n + 1, __ATOMIC_RELEASE);
		registry_index_add_locked(&r->entries[n]);
		return &r->entries[n];
	}
	struct cp_registry_chunk *c = registry_tail;
	if (!c || c->count >= c->capacity)
		c = registry_grow_locked(r);
	if (!c) {
		registry_names--;
		return registry_refuse_locked(r);
	}
	n = c->count;
	fill_entry(&c->entries[n], id, name);
	__atomic_store_n(&c->count, n + 1, __ATOMIC_RELEASE);
	registry_index_add_locked(&c->entries[n]);
	return &c->entries[n];
}

const char *cp_registry_add(uint64_t id, const char *name)
{
	struct cp_registry *r = &cptrace_registry;
	registry_lock_acquire();
	registry_init_header_locked(r);
	struct cp_registry_entry *e = registry_find_locked(id);
	if (e)
		__atomic_store_n(&e->closed, 0, __ATOMIC_RELAXED);
	else
		e = registry_append_locked(r, id, name);
	pthread_mutex_unlock(&registry_lock);
	return e ? e->name : NULL;
}

void cp_registry_mark_closed(uint64_t id)
{
	registry_lock_acquire();
	struct cp_registry_entry *e = registry_find_locked(id);
	if (e)
		__atomic_store_n(&e->closed, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&registry_lock);
}
