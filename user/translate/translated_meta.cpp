// meta.json "translated": see translated_meta.h.
#include "translate/translated_meta.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "translate/unauthenticated_rounds.h"
#include "translate/realtime_offset.h"
#include "os/time_units.h"
#include "os/say.h"

namespace cptrace {

using nlohmann::json;

json measure_frequency(const TranslateNode& ref, const PairMap& pairs, size_t ref_idx) {
  const auto& pts = ref.reader->clock_map().points();
  json j = {{"stream_hz", ref.reader->clock_map().tsc_hz()}};
  if (pts.size() < 2) {
    j["error"] = "reference has fewer than two clock-correlation points: durations in ns unavailable";
    return j;
  }
  int64_t a = std::numeric_limits<int64_t>::max(), b = std::numeric_limits<int64_t>::min();
  for (const auto& [k, p] : pairs)
    if (p.to == ref_idx && p.ratio) {
      a = std::min(a, p.ratio->j.y);
      b = std::max(b, p.ratio->m.y);
    }
  std::string source = "reference clock stream between the MinRTT1 and MinRTT2 instants";
  if (a >= b) {
    a = int64_t(pts.front().tsc);
    b = int64_t(pts.back().tsc);
    source = "reference clock stream, first to last point";
  }
  auto nearest = [&](int64_t t) {
    auto it = std::min_element(pts.begin(), pts.end(), [t](const ClockPoint& x, const ClockPoint& y) {
      return std::llabs(int64_t(x.tsc) - t) < std::llabs(int64_t(y.tsc) - t);
    });
    return size_t(it - pts.begin());
  };
  const ClockMap& map = ref.reader->clock_map();
  size_t i1 = nearest(a), i2 = nearest(b);
  auto f = map.tsc_frequency(i1, i2);
  if (!f) {
    i1 = 0, i2 = pts.size() - 1;
    f = map.tsc_frequency(i1, i2);
  }
  const ClockPoint &p1 = pts[i1], &p2 = pts[i2];
  if (!f) {
    j["error"] = "reference clock stream does not advance: durations in ns unavailable";
    return j;
  }
  j["hz"] = f->hz;
  j["hz_lo"] = f->lo;
  j["hz_hi"] = f->hi;
  j["clock"] = f->clock();
  j["span_s"] = ns_to_seconds(double(p2.mono_ns - p1.mono_ns));
  j["source"] = source + ", against " + f->clock();
  // A TSC rate change in the stretch: the interval holds both sides' rates.
  if (uint64_t n = map.model_stats().tsc_rate_changes) {
    j["tsc_rate_changes"] = n;
    j["source"] = j["source"].get<std::string>() + fmt::format(", widened over the TSC's {} rate change(s)", n);
  }
  return j;
}

json translated_meta(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes, size_t ref,
                     const PairMap& pairs, const ReferencePaths& paths, const json& sync_check,
                     const std::vector<SyncFinding>& findings, const PacketMatches& packets) {
  json tr = {{"reference", nodes[ref].name},
             {"method", name_of(opt.method)},
             {"clock_model", name_of(opt.clock_model)},
             {"inputs", name_of(opt.inputs)}};
  if (opt.clock_model == ClockModel::Piecewise) tr["max_drift_ppm"] = opt.max_drift_ppm;
  // Only a chosen level is written: the default's meta.json stays as it was.
  if (opt.compression_level != kTranslateDefaultLevel) tr["compression_level"] = opt.compression_level;
  tr["sync_check"] = sync_check;
  if (!findings.empty()) {
    tr["suspect_sync"] = json::array();
    for (const SyncFinding& f : findings) tr["suspect_sync"].push_back(f.to_json());
  }
  std::vector<std::string> unauth = unauthenticated_rounds(nodes);
  if (!unauth.empty()) {
    tr["unauthenticated_rounds"] = unauth;
    say("{}", unauthenticated_warning(unauth));
  }
  tr["frequency"] = measure_frequency(nodes[ref], pairs, ref);
  tr["packets"] = packets.total.to_json();
  tr["pairs"] = json::array();
  for (auto& [k, p] : pairs) tr["pairs"].push_back(pair_json(nodes, p));
  tr["realtime_offsets"] = json::array();
  for (size_t v = 0; v < nodes.size(); ++v)
    if (v != ref)
      tr["realtime_offsets"].push_back(measure_realtime_offset(nodes[v].name, nodes[v].reader->clock_map().points(),
                                                               *paths.to_ref[v], nodes[ref].name,
                                                               nodes[ref].reader->clock_map())
                                           .to_json());
  for (size_t v = 0; v < nodes.size(); ++v) {
    json nj = {{"index", v},
               {"node", nodes[v].name},
               {"dir", nodes[v].dir},
               {"span_tsc", {nodes[v].span_lo, nodes[v].span_hi}},
               {"tsc_hz_stream", nodes[v].reader->clock_map().tsc_hz()},
               {"path", paths.names[v]},
               {"to_reference", paths.to_ref[v]->to_json()},
               {"clock_model", clock_model_json(nodes[v].reader->clock_map())}};
    if (v != ref && nodes[v].span_hi > nodes[v].span_lo)
      nj["width_mid_ticks"] = paths.to_ref[v]->at(nodes[v].span_lo + (nodes[v].span_hi - nodes[v].span_lo) / 2).width();
    tr["nodes"].push_back(nj);
  }
  json meta = {{"node", "translated:" + nodes[ref].name}, {"translated", tr}, {"complete", false}};
  return meta;
}

json channels_json(const std::vector<TranslateNode>& nodes) {
  std::map<uint64_t, std::string> names;
  for (const TranslateNode& n : nodes)
    for (const auto& [id, c] : n.reader->channels()) names.emplace(id, c.name);
  json a = json::array();
  for (auto& [id, name] : names) a.push_back({{"id", id}, {"name", name}, {"pid", 0}});
  return a;
}

}  // namespace cptrace
