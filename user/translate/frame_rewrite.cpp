// One node's frames onto the reference TSC: see frame_rewrite.h.
#include "translate/frame_rewrite.h"

#include <algorithm>
#include <exception>
#include <stdexcept>

#include <fmt/format.h>

#include "tables/parallel_for.h"
#include "translate/relation_cursor.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

// One input frame of a node translated into one output frame, on any thread.
// An error (a timestamp beyond the supported range, disjoint bounds) is kept
// with its frame: it is raised when that frame's turn to be written comes.
struct FrameOut {
  EncodedFrame frame;
  uint64_t events = 0, in_transition = 0;
  StampErrors errs;
  std::exception_ptr error;
};

void translate_frame(const TranslateNode& n, size_t i, uint16_t index, RelationCursor& cursor,
                     const Ranges& transitions, int level, FrameOut& f) {
  thread_local std::vector<TraceEvent> evs;
  thread_local std::vector<TranslatedEvent> out;
  n.reader->read_events(i, evs);
  out.resize(evs.size());
  uint64_t in_transition = 0;
  f.errs = {};
  for (size_t k = 0; k < evs.size(); ++k) {
    const TraceEvent& e = evs[k];
    if (e.ts > kTranslateTscRange)
      throw std::runtime_error(fmt::format("{}: event timestamp {} is beyond the supported TSC range", n.dir, e.ts));
    Bound b = cursor.at_stamp(e.ts, e.ts_err);  // a stamp's own interval widens the bound
    in_transition += stamp_in_ranges(transitions, e.ts, e.ts_err);
    const bool on_cpu = e.timebase == uint8_t(Timebase::TscOnCpu);
    f.errs.add(e.ts_err, on_cpu, e.cpu);
    out[k] = {e.ts, b.est, b.lo, b.hi, e.channel, e.tuple, e.pid, e.tid, e.cpu, index, e.kind, on_cpu};
  }
  encode_translated(out.data(), out.size(), level, f.frame);
  f.events = out.size(), f.in_transition = in_transition;
}

}  // namespace

bool stamp_in_ranges(const Ranges& ranges, uint64_t ts, uint64_t err) {
  const int64_t lo = int64_t(ts - std::min(ts, err)), hi = int64_t(ts + std::min(err, kTranslateTscRange));
  return std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return lo <= r.second && hi >= r.first; });
}

NodeRewrite translate_node(const TranslateNode& n, uint16_t index, const Relation& rel, const Ranges& transitions,
                           unsigned threads, int level, TraceWriter& w) {
  NodeRewrite done;
  const size_t frames = n.reader->event_frame_count();
  if (frames == 0) n.reader->for_each_batch([](const std::vector<TraceEvent>&) {});  // its checks, as before
  std::vector<RelationCursor> cursors(threads, RelationCursor(rel));
  // A few frames a thread per batch: decoded and encoded frames are a fixed
  // cost, whatever the trace's size.
  const size_t batch = threads > 1 ? 4 * size_t(threads) : 1;
  std::vector<FrameOut> outs(std::min(batch, frames));
  for (size_t at = 0; at < frames; at += batch) {
    const size_t k = std::min(batch, frames - at);
    parallel_for(threads, k, [&](size_t j, unsigned worker) {
      FrameOut& f = outs[j];
      f.error = nullptr;
      try {
        translate_frame(n, at + j, index, cursors[worker], transitions, level, f);
      } catch (...) {
        f.error = std::current_exception();
      }
    });
    for (size_t j = 0; j < k; ++j) {
      if (outs[j].error) std::rethrow_exception(outs[j].error);
      w.write(outs[j].frame);
      done.events += outs[j].events;
      done.in_transition += outs[j].in_transition;
      done.errs.merge(outs[j].errs);
    }
  }
  return done;
}

}  // namespace cptrace
