#include "cluster/trace_ends.h"

#include <algorithm>
#include <map>

#include <fmt/core.h>

#include "clock/clock_map.h"
#include "trace/trace_reader.h"
#include "translate/clock_relation.h"
#include "translate/translated_frame.h"

namespace cptrace::cluster {

void locate_trace_ends(const std::string& translated, std::vector<NodeRun>& nodes) {
  std::map<std::string, NodeRun*> lost;
  for (NodeRun& n : nodes)
    if (n.killed()) lost[n.spec.name] = &n;
  if (lost.empty()) return;
  TraceReader t(translated);
  std::map<uint16_t, NodeRun*> by_index;
  std::map<NodeRun*, RelationPtr> to_ref;
  const auto tn = t.meta()["translated"].value("nodes", nlohmann::json::array());
  for (size_t i = 0; i < tn.size(); ++i)
    if (auto it = lost.find(tn[i].value("node", std::string())); it != lost.end()) {
      by_index[uint16_t(i)] = it->second;
      if (tn[i].contains("to_reference")) to_ref[it->second] = relation_from_json(tn[i]["to_reference"]);
    }
  std::map<NodeRun*, TranslatedEvent> last;
  std::vector<TranslatedEvent> evs;
  t.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs)
      if (auto it = by_index.find(e.node); it != by_index.end()) {
        auto [at, fresh] = last.try_emplace(it->second, e);
        if (!fresh && e.local_ts > at->second.local_ts) at->second = e;
      }
  });
  TraceReader ref(nodes[0].local);
  double hz = ref.clock_map().tsc_hz();
  const int64_t start = int64_t(ref.trace_meta().start.tsc.value_or(0));
  if (!(hz > 0)) return;
  auto clock = fmt::format("times on {}'s clock, seconds since its recording began", nodes[0].spec.name);
  for (auto& [n, e] : last)
    n->trace_end = {{"trace_ends_s", double(e.ref_ts - start) / hz},
                    {"trace_ends_err_s", double(std::max(e.ref_hi - e.ref_ts, e.ref_ts - e.ref_lo)) / hz},
                    {"clock", clock}};
  for (auto& [n, rel] : to_ref) {
    if (!n->done_json.contains("ended_mono_ns")) continue;
    try {  // the node's clock stream and relation may not reach that far: then not said
      ClockMap cm = TraceReader(n->local).clock_map();
      const auto& m = n->done_json["ended_mono_ns"];
      Bound lo = rel->at(int64_t(cm.mono_to_tsc_bounds(m[0].get<uint64_t>()).lo)),
            hi = rel->at(int64_t(cm.mono_to_tsc_bounds(m[1].get<uint64_t>()).hi));
      n->trace_end["killed_s"] = {double(lo.lo - start) / hz, double(hi.hi - start) / hz};
      n->trace_end["clock"] = clock;
    } catch (const std::exception&) {
    }
  }
}

}  // namespace cptrace::cluster
