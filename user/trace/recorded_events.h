// Events as the collector builds them and the Events2 frame stores them: per
// event its stamp, channel and tuple as the application's batch entry (struct
// cp_batch_entry, so a batch record is copied into a block by one memcpy), and
// runs of the fields a ring record gives once for all its events (pid, tid,
// cpu, kind, timebase). Before, the drain scattered every record into eight
// columns, a store per field of every event.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cptrace_records.h"
#include "trace/trace_format.h"

namespace cptrace {

// One event's own fields: {tsc (the stamp, whatever its timebase), channel, tuple}.
using EventEntry = cp_batch_entry;

// Rows [previous run's end, end) share these fields.
struct EventRun {
  uint32_t end = 0;
  uint32_t pid = 0, tid = 0;
  uint16_t cpu = 0;
  uint8_t kind = 0, timebase = 0;
  bool same_fields(const EventRun& o) const {
    return pid == o.pid && tid == o.tid && cpu == o.cpu && kind == o.kind && timebase == o.timebase;
  }
};

// Rows are sized once (reserve(), which also touches the memory) and written
// by index, so a recorder in steady state neither allocates nor faults.
// Rows [0, size()) are valid; every row belongs to exactly one run.
class RecordedEvents {
 public:
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t capacity() const { return rows_.size(); }
  void clear() {
    n_ = 0;
    runs_.clear();
  }
  // Room for `cap` rows (and as many runs), the rows written once so later
  // writes do not page-fault.
  void reserve(size_t cap);
  // Adds k >= 1 rows sharing `fields` (its `end` is ignored) and returns the
  // first one; the caller writes them. Joins the last run when its fields are
  // the same.
  EventEntry* append_run(size_t k, const EventRun& fields);
  void push_back(const TraceEvent& e);
  template <class It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(*first);
  }
  // k rows, every field zero.
  void assign_zeros(size_t k);
  EventEntry* rows() { return rows_.data(); }
  const EventEntry* rows() const { return rows_.data(); }
  const std::vector<EventRun>& runs() const { return runs_; }
  // The row as a TraceEvent (a search over the runs: tests and rare paths).
  TraceEvent at(size_t i) const;

 private:
  size_t n_ = 0;
  std::vector<EventEntry> rows_;
  std::vector<EventRun> runs_;
};

// The runs of consecutive rows with the same pid, tid, cpu, kind and timebase.
void runs_of_rows(const TraceEvent* ev, size_t n, std::vector<EventRun>& out);

}  // namespace cptrace
