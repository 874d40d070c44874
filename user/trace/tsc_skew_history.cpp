#include "trace/tsc_skew_history.h"

#include <algorithm>

namespace cptrace {

namespace {

using json = nlohmann::json;
using Interval = TscSkewHistory::Interval;

constexpr uint64_t kMaxErr = uint64_t(1) << 62;

uint64_t abs_ticks(int64_t v) { return v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v); }

uint64_t half_width(const Interval& iv) {
  return std::min(kMaxErr, std::max(abs_ticks(iv.first), abs_ticks(iv.second)));
}

std::optional<Interval> interval_of(const json& w) {
  if (!w.is_array() || w.size() != 2 || !w[0].is_number_integer() || !w[1].is_number_integer()) return std::nullopt;
  Interval iv{w[0].get<int64_t>(), w[1].get<int64_t>()};
  if (iv.first > iv.second) return std::nullopt;
  return iv;
}

// A measure's per-CPU intervals ("skew" objects of clock/tsc_skew.h to_json).
std::map<int, Interval> per_cpu(const json& m) {
  std::map<int, Interval> out;
  if (!m.is_object() || !m.contains("cpus") || !m["cpus"].is_array()) return out;
  for (const json& c : m["cpus"]) {
    if (!c.is_object() || !c.value("cpu", json()).is_number_integer()) continue;
    auto iv = interval_of(json::array({c.value("lo", json()), c.value("hi", json())}));
    if (iv) out[c["cpu"].get<int>()] = *iv;
  }
  return out;
}

Interval hull(const Interval& a, const Interval& b) {
  return {std::min(a.first, b.first), std::max(a.second, b.second)};
}

bool disjoint(const Interval& a, const Interval& b) { return a.second < b.first || b.second < a.first; }

}  // namespace

TscSkewHistory TscSkewHistory::from_meta(const json& meta) {
  TscSkewHistory h;
  const json& t = meta.is_object() ? meta.value("tsc", json::object()) : json::object();
  if (!t.is_object()) return h;
  // The widest intervals at start and stop, as every version wrote them.
  const json sk = t.value("skew_ticks", json::object());
  for (const char* when : {"at_start", "at_stop"})
    if (auto iv = interval_of(sk.is_object() ? sk.value(when, json()) : json()))
      h.err = std::max(h.err, half_width(*iv));
  const json per = t.value("skew", json::object());
  if (!per.is_object()) return h;
  bool one_reference = true;
  auto note_reference = [&](const json& m) {
    json r = m.is_object() ? m.value("reference_cpu", json()) : json();
    if (!r.is_number_integer() || (h.reference_cpu && *h.reference_cpu != r.get<int>())) one_reference = false;
    if (r.is_number_integer()) h.reference_cpu = r.get<int>();
  };
  for (const char* when : {"at_start", "at_stop"}) {
    const json m = per.value(when, json());
    // A measure not taken (the stop's, until the recorder stops; never, when it
    // was killed) names no CPU and bounds nothing: the others decide alone.
    if (m.is_null()) continue;
    note_reference(m);
    for (const auto& [cpu, iv] : per_cpu(m)) h.ends[cpu] = h.ends.count(cpu) ? hull(h.ends[cpu], iv) : iv;
  }
  for (const auto& [cpu, iv] : h.ends) h.cpu_err[cpu] = half_width(iv);
  const json periodic = per.value("periodic", json::array());
  for (const json& m : periodic.is_array() ? periodic : json::array()) {
    h.periodic++;
    note_reference(m);
    if (m.is_object() && !m.value("unmeasured_cpus", json::array()).empty()) h.periodic_incomplete++;
    for (const auto& [cpu, iv] : per_cpu(m)) {
      auto e = h.ends.find(cpu);
      if (e != h.ends.end() && !disjoint(e->second, iv)) continue;
      if (e != h.ends.end()) h.moved++;  // a CPU the ends did not measure is held, not counted
      h.err = std::max(h.err, half_width(iv));
      h.cpu_err[cpu] = std::max(h.cpu_err[cpu], half_width(iv));
    }
  }
  // Measures against different CPUs (or naming none) do not say where one CPU's
  // TSC is against one timeline: every stamp keeps the widest.
  if (!one_reference) h.reference_cpu.reset(), h.cpu_err.clear();
  return h;
}

uint64_t TscSkewHistory::err_on(int cpu) const {
  if (reference_cpu && cpu == *reference_cpu) return 0;
  auto it = cpu_err.find(cpu);
  return it != cpu_err.end() ? it->second : err;
}

}  // namespace cptrace
