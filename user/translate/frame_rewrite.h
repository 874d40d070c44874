// The events of one node rewritten onto the reference TSC: each Events frame
// of its trace becomes one Translated frame (translated_frame.h), a few frames
// per thread in flight, written in the node's file order, so memory stays
// bounded whatever the trace's size and the output is the same for any number
// of threads.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "trace/trace_writer.h"
#include "translate/clock_relation.h"
#include "translate/stamp_errors.h"
#include "translate/translate_nodes.h"

namespace cptrace {

// Local clock ranges where the first hop of a node's path is non-linear: the
// bound is not guaranteed there.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Whether a stamp's whole interval [ts - err, ts + err] reaches into one of
// `ranges` (its error can carry it there: the bound is not guaranteed then).
bool stamp_in_ranges(const Ranges& ranges, uint64_t ts, uint64_t err);

struct NodeRewrite {
  uint64_t events = 0;
  uint64_t in_transition = 0;  // events reaching into the `transitions` ranges (stamp_in_ranges)
  StampErrors errs;  // the errors of the stamps on the node's own TSC
};

// Translates one node's events through its relation, frame by frame, on
// `threads` threads (each with its own cursor: a cursor's answers are
// Relation::at's whatever it cached), written in file order. Counts the events inside `transitions` (local clock ranges
// where the first hop of the node's path is non-linear and the bound is not guaranteed).
NodeRewrite translate_node(const TranslateNode& n, uint16_t index, const Relation& rel, const Ranges& transitions,
                           unsigned threads, int level, TraceWriter& w);

}  // namespace cptrace
