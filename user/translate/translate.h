// `cptrace translate`: puts every node's events on the reference node's TSC with a
// strict bound, and records the clock relations that produced the bounds.
//
// Input: one trace directory per node (meta.json "node" names it) holding its
// events and the MinRTT rounds it initiated. For every node pair with rounds, the
// ratio method (ratio_sync.h) and the convex-hull method (hull_sync.h) each give a
// relation; --method picks ratio, hull, or best (both hold, so their intersection
// does: the tighter bound at every instant). Each node is related to the reference
// along the path of node pairs whose bounds are tightest (Dijkstra over the bound
// width at the middle of the node's span), composed conservatively.
//
// Before anything is written, every pair's rounds are checked against physics
// (sync_sanity.h): a finding stops translate unless accept_suspect_sync is set.
//
// Output: a trace directory readable by TraceReader: meta.json (field
// "translated": reference, method, nodes with their relation to the reference,
// every pair's relations and MinRTTs used, the reference's measured TSC frequency)
// and events.cpt with a Channels frame (all nodes' channels) and Translated frames
// (translated_frame.h), written node after node in each node's file order, one
// input frame at a time, so memory stays bounded whatever the trace size.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/clock_relation.h"

namespace cptrace {

struct TranslateOptions {
  std::vector<std::string> dirs;
  std::string reference;
  std::string out;
  std::string method = "best";  // ratio | hull | best
  bool overwrite = false;
  // Translate even when a pair's rounds contradict each other or physics
  // (sync_sanity.h); the findings are then written into meta.json "translated"
  // "suspect_sync" and printed as WARNING lines. Default: refuse.
  bool accept_suspect_sync = false;
  // linear: the methods above (clocks linear over the span, or split where hulls
  // cross); piecewise: the rate-bounded relation (drift_bound.h) over every round
  // and matched packet, strict whatever the rates do within +-max_drift_ppm.
  std::string clock_model = "linear";
  double max_drift_ppm = 500;
  // Which constraints relate a node pair: MinRTT rounds, matched packets
  // (traffic), or both (default). One alone is for comparing what each gives.
  std::string inputs = "both";
};

struct TranslateSummary {
  uint64_t events = 0;
  nlohmann::json meta;  // what was written as meta.json
};

TranslateSummary translate(const TranslateOptions& opt);
int cmd_translate(const TranslateOptions& opt);

// The relation of a pair entry of the translated meta.json under `method`
// (null when that method has none for the pair).
RelationPtr pair_relation(const nlohmann::json& pair, const std::string& method);

}  // namespace cptrace
