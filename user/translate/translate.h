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
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/clock_relation.h"

namespace cptrace {

// zstd level 1: what translate wrote before the level could be chosen.
constexpr int kTranslateDefaultLevel = 1;

// --method: which relation of a node pair is used (see above).
enum class Method { Ratio, Hull, Best };
// --clock-model: linear, the methods above (clocks linear over the span, or split
// where hulls cross); piecewise, the rate-bounded relation (drift_bound.h) over
// every round and matched packet, strict whatever the rates do within
// +-max_drift_ppm.
enum class ClockModel { Linear, Piecewise };
// --inputs: which constraints relate a node pair: MinRTT rounds, matched packets
// (traffic), or both. One alone is for comparing what each gives.
enum class Inputs { Both, Rounds, Traffic };

// The one spelling of each value, on the command line and in meta.json "translated".
std::string name_of(Method m);
std::string name_of(ClockModel m);
std::string name_of(Inputs i);
// The value a name spells; anything else throws std::invalid_argument naming
// `what` (the flag, or where in meta.json the name was read), the bad name and
// the names that exist.
Method parse_method(std::string_view s, std::string_view what = "--method");
ClockModel parse_clock_model(std::string_view s, std::string_view what = "--clock-model");
Inputs parse_inputs(std::string_view s, std::string_view what = "--inputs");

struct TranslateOptions {
  std::vector<std::string> dirs;
  std::string reference;  // empty: the only node (an error with several)
  std::string out;
  Method method = Method::Best;
  bool overwrite = false;
  // Translate even when a pair's rounds contradict each other or physics
  // (sync_sanity.h); the findings are then written into meta.json "translated"
  // "suspect_sync" and printed as WARNING lines. Default: refuse.
  bool accept_suspect_sync = false;
  ClockModel clock_model = ClockModel::Linear;
  double max_drift_ppm = 500;
  Inputs inputs = Inputs::Both;
  // --threads: frames translated at once (0: every CPU). The output is the same
  // for any number: frames are independent once the relations are known.
  unsigned threads = 0;
  // --compression-level: the zstd level of the Translated frames (negative:
  // zstd's fast levels, less CPU for larger frames). Readers need not know it:
  // a zstd frame decodes the same whatever level wrote it. Any level other than
  // the default is written into meta.json "translated" "compression_level".
  int compression_level = kTranslateDefaultLevel;
};

struct TranslateSummary {
  uint64_t events = 0;
  nlohmann::json meta;  // what was written as meta.json
};

TranslateSummary translate(const TranslateOptions& opt);
int cmd_translate(const TranslateOptions& opt);

// The relation a node pair is translated with under `method`, from its ratio and
// hull relations (either may be null): the one asked for; under best, both hold,
// so their intersection, except where the hulls cross (not hull_linear): the
// ratio's one line contradicts the rounds there and the split hull is used.
// translate and pair_relation both decide through this.
RelationPtr choose_relation(Method method, const RelationPtr& ratio, const RelationPtr& hull, bool hull_linear);

// The relation of a pair entry of the translated meta.json under `method`
// (null when that method has none for the pair).
RelationPtr pair_relation(const nlohmann::json& pair, Method method);

}  // namespace cptrace
