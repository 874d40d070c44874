// One node's frames onto the reference TSC: see frame_rewrite.h.
#include "translate/frame_rewrite.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

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

// The same, an error kept with its frame (raised when the frame is written).
void translate_kept(const TranslateNode& n, size_t i, uint16_t index, RelationCursor& cursor, const Ranges& transitions,
                    int level, FrameOut& f) {
  f.error = nullptr;
  try {
    translate_frame(n, i, index, cursor, transitions, level, f);
  } catch (...) {
    f.error = std::current_exception();
  }
}

}  // namespace

bool stamp_in_ranges(const Ranges& ranges, uint64_t ts, uint64_t err) {
  const int64_t lo = int64_t(ts - std::min(ts, err)), hi = int64_t(ts + std::min(err, kTranslateTscRange));
  return std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return lo <= r.second && hi >= r.first; });
}

namespace {

void take(NodeRewrite& done, TraceWriter& w, FrameOut& f) {
  if (f.error) std::rethrow_exception(f.error);
  w.write(f.frame);
  done.events += f.events;
  done.in_transition += f.in_transition;
  done.errs.merge(f.errs);
}

// Frames are taken in order by `workers` threads that live for the whole node
// (each keeps its buffers and zstd contexts: threads started anew for each
// batch of frames allocated and faulted them in again, a third of translate's
// time on a trace of Events2 frames), at most one slot per frame ahead of the
// frame written next; the calling thread writes them in file order.
class OrderedFrames {
 public:
  OrderedFrames(size_t frames, size_t slots) : frames_(frames), slots_(slots), ready_(slots, false) {}

  // The next frame for a worker, once its slot is free; false when none is left.
  bool claim(size_t& i) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stop_ || next_ >= frames_ || next_ < written_ + slots_.size(); });
    if (stop_ || next_ >= frames_) return false;
    i = next_++;
    return true;
  }
  FrameOut& slot(size_t i) { return slots_[i % slots_.size()]; }
  void done(size_t i) {
    {
      std::lock_guard lk(mu_);
      ready_[i % slots_.size()] = true;
    }
    cv_.notify_all();
  }
  // The writer: frame i (in order) once translated, then its slot given back.
  FrameOut& wait(size_t i) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return bool(ready_[i % slots_.size()]); });
    return slots_[i % slots_.size()];
  }
  void written(size_t i) {
    {
      std::lock_guard lk(mu_);
      ready_[i % slots_.size()] = false;
      written_ = i + 1;
    }
    cv_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t frames_, next_ = 0, written_ = 0;
  bool stop_ = false;
  std::vector<FrameOut> slots_;
  std::vector<bool> ready_;
};

}  // namespace

NodeRewrite translate_node(const TranslateNode& n, uint16_t index, const Relation& rel, const Ranges& transitions,
                           unsigned threads, int level, TraceWriter& w) {
  NodeRewrite done;
  const size_t frames = n.reader->event_frame_count();
  if (frames == 0) n.reader->for_each_batch([](const std::vector<TraceEvent>&) {});  // its checks, as before
  const unsigned workers = unsigned(std::min<size_t>(std::max(threads, 1u), frames));
  if (workers <= 1) {
    RelationCursor cursor(rel);
    FrameOut f;
    for (size_t i = 0; i < frames; ++i) {
      translate_kept(n, i, index, cursor, transitions, level, f);
      take(done, w, f);
    }
    return done;
  }
  // A few frames a worker in flight: decoded and encoded frames are a fixed
  // cost, whatever the trace's size.
  OrderedFrames order(frames, 4 * size_t(workers));
  std::vector<std::thread> pool;
  for (unsigned k = 0; k < workers; ++k)
    pool.emplace_back([&, k] {
      RelationCursor cursor(rel);  // each its own: a cursor's answers are Relation::at's whatever it cached
      for (size_t i; order.claim(i); order.done(i))
        translate_kept(n, i, index, cursor, transitions, level, order.slot(i));
    });
  try {
    for (size_t i = 0; i < frames; ++i) {
      take(done, w, order.wait(i));
      order.written(i);
    }
  } catch (...) {
    order.stop();
    for (std::thread& t : pool) t.join();
    throw;
  }
  for (std::thread& t : pool) t.join();
  return done;
}

}  // namespace cptrace
