/* SPDX-License-Identifier: GPL-2.0 */
/* Per-CPU rings and per-CPU counters, shared by every cptrace BPF program.
 *
 * Each program writes its records into the ring buffer of the CPU it runs on
 * (an ARRAY_OF_MAPS indexed by CPU, whose inner rings user space creates and
 * installs before attaching), so producers on different CPUs never contend for
 * one reservation lock. Every record that cannot be written is counted in a
 * per-CPU counter array: recorded + dropped = seen, exactly. */
#pragma once

/* The inner map's template; user space sets the real size per ring. */
struct cp_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
};

/* `name`: one ring buffer per CPU (max_entries is set to the CPU count at load). */
#define CP_PER_CPU_RINGS(name)                                                                               \
	struct {                                                                                             \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                                    \
		__uint(max_entries, 1024);                                                                   \
		__type(key, __u32);                                                                          \
		__array(values, struct cp_ring);                                                             \
	} name SEC(".maps")

/* `name`: `n` per-CPU __u64 counters, indexed by the program's CNT enum. */
#define CP_PER_CPU_COUNTERS(name, n)                                                                         \
	struct {                                                                                             \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                                     \
		__uint(max_entries, n);                                                                      \
		__type(key, __u32);                                                                          \
		__type(value, __u64);                                                                        \
	} name SEC(".maps")

/* This CPU's ring, or NULL if user space installed none for it. */
static __always_inline void *cp_ring_of_cpu(void *rings, __u32 cpu)
{
	return bpf_map_lookup_elem(rings, &cpu);
}

/* Wake the collector only once `wakeup_bytes` wait in the ring: a wakeup costs
 * the producing thread microseconds, so we never wake per record. The
 * collector drains on a timer as well, so less data never waits for long. */
static __always_inline __u64 cp_wake_flag(void *rb, __u64 wakeup_bytes)
{
	return bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									: BPF_RB_NO_WAKEUP;
}

/* Adds n to this CPU's counter idx. Atomic although per-CPU: a program in
 * softirq context (packet receive) can interrupt a task-context program on the
 * same CPU between the load and the store of a plain increment, and so can a
 * preempting thread on a fully preemptible kernel. */
static __always_inline void cp_count_atomic(void *counters, __u32 idx, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(counters, &idx);
	if (c)
		__sync_fetch_and_add(c, n);
}
