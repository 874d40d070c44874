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
#include <cstdint>

#include <nlohmann/json.hpp>

#include "translate/pair_relations.h"  // choose_relation, pair_relation
#include "translate/translate_options.h"

namespace cptrace {

// What translate did: the events written, and the meta.json written with them
// (everything the command's summary says is in it).
struct TranslateSummary {
  uint64_t events = 0;
  nlohmann::json meta;  // what was written as meta.json
};

// The stages in order (each in its module): the traces opened and checked as a
// set (translate_nodes.h), every pair's relations and their physics check
// (pair_relations.h), each node's path to the reference (reference_paths.h),
// meta.json (translated_meta.h), then every node's frames (frame_rewrite.h).
// Prints no summary (translate_summary.h does, from the result); warnings on
// stderr as they arise, so they come before an error that follows them.
TranslateSummary translate(const TranslateOptions& opt);

}  // namespace cptrace
