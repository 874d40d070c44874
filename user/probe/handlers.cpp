#include "probe/handlers.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "cptrace.h"
#include "probe/probe_attach.h"

namespace cptrace {

std::unique_ptr<HandlerTable> make_handler_table(Probes& probes, double tsc_hz) {
  int fd = probes.handlers_fd();
  bpf_map_info info{};
  __u32 len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
    throw std::runtime_error(fmt::format("reading the BPF handlers map's size: {}", strerror(errno)));
  return std::make_unique<HandlerTable>(
      [fd](uint64_t id, const cp_handler& v) { return bpf_map_update_elem(fd, &id, &v, BPF_ANY) ? -errno : 0; },
      [&probes] { probes.enable_handlers(); }, tsc_hz, info.max_entries);
}

// ---- state left in BPF at stop ------------------------------------------------------

namespace {

// Every key of a per-CPU hash with its per-CPU values (value_size rounded to 8):
// one per CPU and lane (CP_LANES).
template <class V, class Fn>
void for_each_percpu(int fd, Fn fn) {
  int ncpu = libbpf_num_possible_cpus();
  size_t stride = (sizeof(V) + 7) / 8 * 8;
  std::vector<uint8_t> vals(stride * ncpu);
  cp_slot_key key{}, next{};
  void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (bpf_map_lookup_elem(fd, &key, vals.data())) continue;
    for (int cpu = 0; cpu < ncpu; ++cpu) {
      V v;
      std::memcpy(&v, vals.data() + stride * cpu, sizeof v);
      fn(key, cpu, v);
    }
  }
}

}  // namespace

HeldEvents collect_held_events(int last_fd, int count_fd) {
  HeldEvents out;
  out.filtered_fix.assign(libbpf_num_possible_cpus(), 0);
  // firstlast: per (channel, gen), the slot with the highest seq over all CPUs
  // and lanes.
  std::map<std::pair<uint64_t, uint64_t>, std::pair<int, cp_last_slot>> last;
  for_each_percpu<cp_last_slot>(last_fd, [&](const cp_slot_key& k, int cpu, const cp_last_slot& s) {
    if (!s.seq) return;
    auto& best = last[{k.channel, k.gen}];
    if (s.seq > best.second.seq) best = {cpu, s};
  });
  for (auto& [k, v] : last) {
    const cp_last_slot& s = v.second;
    TraceEvent e;
    e.ts = s.ts;
    e.channel = k.first;
    e.tuple = s.tuple;
    e.pid = s.pid;
    e.tid = s.tid;
    e.cpu = uint16_t(s.cpu);
    e.kind = uint8_t(EventKind::User);
    e.timebase = uint8_t(s.timebase ? Timebase::Tsc : Timebase::MonoNs);
    out.events.push_back(e);
    out.filtered_fix[v.first]++;  // counted as filtered on the CPU that held it
  }
  // counter: the period each CPU (lane) was still counting.
  for_each_percpu<cp_count_slot>(count_fd, [&](const cp_slot_key& k, int cpu, const cp_count_slot& s) {
    if (!s.count) return;
    TraceEvent e;
    e.ts = s.bucket * s.period;
    e.channel = k.channel;
    e.tuple = s.count;
    e.cpu = uint16_t(cpu);
    e.kind = uint8_t(EventKind::Count);
    e.timebase = uint8_t(s.timebase ? Timebase::Tsc : Timebase::MonoNs);
    out.events.push_back(e);
  });
  return out;
}

}  // namespace cptrace
