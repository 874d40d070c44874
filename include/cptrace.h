/* cptrace application API.
 *
 * An application names its probe points ("channels") once and then logs events
 * on them: an event is (channel, tuple id) plus a timestamp. Nothing is recorded
 * by the library itself. The functions marked PROBE SITE below only read the
 * TSC and reach a 5-byte NOP (`rdtsc ...; nop5; ret`); `cptrace record`
 * attaches uprobes to that NOP and its BPF programs read the arguments and the
 * TSC the site read at the call. With no recorder attached an event costs a call, a TSC read and a
 * return (~10 ns).
 *
 *   uint64_t ch = cp_open_channel("parser.in");
 *   for (...) cp_logTS(ch, item_id);          // ~20 ns; recorded, one optimized uprobe
                                             // hit (0.3-1.5 us by host: make bench),
                                             // or buffered where hits would trap
 *   for (...) cp_logTS_batch(ch, item_id);    // hot loops: buffered, rdtscp-stamped
 *   cp_close_channel(ch);
 *
 * Thread safety: every function may be called from any thread. None is
 * async-signal-safe except cp_logTS (but for a thread's first buffered call).
 *
 * Usable from C and C++; link with -lcptrace (or libcptrace.a) and -lpthread. */
#ifndef CPTRACE_H
#define CPTRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#define CP_NOEXCEPT noexcept
#else
#define CP_NOEXCEPT
#endif

/* Longest channel name kept, including the terminating NUL (same value as in
 * cptrace_records.h, which the BPF side uses). */
#ifndef CP_CHANNEL_NAME_MAX
#define CP_CHANNEL_NAME_MAX 64
#endif

/* The channel id of `name`: the 64-bit FNV-1a hash of its bytes (without the
 * NUL), with 0 mapped to 1 so that 0 never names a channel. The same name gives
 * the same id in every process on every node, which is how channels are matched
 * across a distributed trace. Inline so tools can compute ids without linking
 * the library. */
static inline uint64_t cp_channel_id(const char *name) CP_NOEXCEPT
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
	for (const unsigned char *p = (const unsigned char *)name; p && *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull; /* FNV-1a 64 prime */
	}
	return h ? h : 1;
}

/* Opens (names) a channel and returns its id, cp_channel_id(name). Registers the
 * name in the process's channel registry (so a recorder attached later still
 * learns it) and announces it through the cp_channel_announce probe site (so an
 * attached recorder learns it at once). Opening a name again returns the same id
 * and is registered once. Names longer than CP_CHANNEL_NAME_MAX-1 bytes are
 * truncated in the registry and the announcement; the id is always the hash of
 * the full name. NULL is treated as "". */
uint64_t cp_open_channel(const char *name) CP_NOEXCEPT;

/* Logs one event, stamped with the TSC read at the call (before any probe
 * fires, so neither the uprobe's entry delay nor an NTP adjustment of the
 * kernel's clocks is in the stamp). The event goes into the thread's buffer
 * like cp_logTS_batch's and reaches the recorder within 0.1 s; with
 * CPTRACE_SINGLE=site in the environment it goes through its own probe site
 * at once instead, one uprobe hit each (docs/record.md, "Single events").
 * Async-signal-safe except a thread's first buffered call. */
void cp_logTS(uint64_t channel, uint64_t tuple_id) CP_NOEXCEPT;

/* Logs one event into the calling thread's buffer, stamped with rdtscp (the
 * TSC and the CPU it was read on; rdtsc where the CPU lacks it). Every
 * CP_BATCH_MAX (256) events the buffer is handed to the cp_batch_submit probe
 * site in one go, which makes a recorded event cost a few ns instead of one
 * probe hit each. The buffer is also handed over by cp_flush(),
 * cp_close_channel(), at thread exit and (for the thread calling exit()) at
 * process exit. Events still buffered in threads that are running when the
 * process exits, or when it dies by _exit(), a signal or SIGKILL, are handed
 * over by the recorder as each thread ends (docs/record.md). */
void cp_logTS_batch(uint64_t channel, uint64_t tuple_id) CP_NOEXCEPT;

/* Hands the calling thread's buffered events over now (no-op when empty). */
void cp_flush(void) CP_NOEXCEPT;

/* Flushes the calling thread's buffer, reports the close through the
 * cp_channel_closed probe site and marks the channel closed in the registry.
 * Events may still be logged on the id afterwards; reopening clears the mark. */
void cp_close_channel(uint64_t channel) CP_NOEXCEPT;

/* ---- Probe sites used by the library itself. Not for applications to call;
 * declared so their signatures (what the BPF programs read) are written down. */
struct cp_batch_entry; /* {u64 tsc, channel, tuple}, see cptrace_records.h */

/* PROBE SITE. `e` points to `n` (0..CP_BATCH_MAX) entries in the calling
 * thread's buffer, valid and resident only during the call. `count_at`, when
 * not NULL, is where that buffer keeps its entry count for as long as the
 * thread lives: the recorder reads it (and the entries) when the thread ends.
 * n == 0 with count_at names the buffer only; n == 0 without forgets it. */
void cp_batch_submit(const struct cp_batch_entry *e, uint32_t n, const uint32_t *count_at) CP_NOEXCEPT;
/* PROBE SITE. `name` is NUL-terminated, at most CP_CHANNEL_NAME_MAX bytes. */
void cp_channel_announce(uint64_t id, const char *name) CP_NOEXCEPT;
/* PROBE SITE. */
void cp_channel_closed(uint64_t id) CP_NOEXCEPT;

#ifdef __cplusplus
}
#endif
#undef CP_NOEXCEPT

#endif /* CPTRACE_H */
