/* The process channel registry (see cptrace_registry.h for the protocol a
 * reader in another process relies on). */
#include <pthread.h>
#include <string.h>

#include "cp_internal.h"
#include "cptrace_registry.h"

/* Zero-initialized, so it lives in .bss and costs no file size; the header is
 * filled in when the first channel is opened. Exported: the recorder finds it
 * by name. */
struct cp_registry cptrace_registry;

/* Writers are rare (channel opens), so one lock is enough. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

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

static struct cp_registry_entry *registry_find_locked(struct cp_registry *r, uint64_t id)
{
	for (uint32_t i = 0; i < r->count; i++)
		if (r->entries[i].id == id)
			return &r->entries[i];
	return NULL;
}

/* Fills the next free slot and only then publishes it by bumping count. */
static struct cp_registry_entry *registry_append_locked(struct cp_registry *r, uint64_t id,
							 const char *name)
{
	uint32_t n = r->count;
	if (n >= CP_REGISTRY_CAPACITY)
		return NULL;
	struct cp_registry_entry *e = &r->entries[n];
	e->id = id;
	e->closed = 0;
	strncpy(e->name, name, sizeof(e->name) - 1);
	e->name[sizeof(e->name) - 1] = '\0';
	__atomic_store_n(&r->count, n + 1, __ATOMIC_RELEASE);
	return e;
}

const char *cp_registry_add(uint64_t id, const char *name)
{
	struct cp_registry *r = &cptrace_registry;
	pthread_mutex_lock(&registry_lock);
	registry_init_header_locked(r);
	struct cp_registry_entry *e = registry_find_locked(r, id);
	if (e)
		__atomic_store_n(&e->closed, 0, __ATOMIC_RELAXED);
	else
		e = registry_append_locked(r, id, name);
	pthread_mutex_unlock(&registry_lock);
	return e ? e->name : NULL;
}

void cp_registry_mark_closed(uint64_t id)
{
	struct cp_registry *r = &cptrace_registry;
	pthread_mutex_lock(&registry_lock);
	struct cp_registry_entry *e = registry_find_locked(r, id);
	if (e)
		__atomic_store_n(&e->closed, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&registry_lock);
}
