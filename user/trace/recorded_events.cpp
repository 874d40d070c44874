#include "trace/recorded_events.h"

#include <algorithm>
#include <stdexcept>

namespace cptrace {

void RecordedEvents::reserve(size_t cap) {
  if (cap <= capacity()) return;
  rows_.resize(cap);
  runs_.reserve(cap);
}

EventEntry* RecordedEvents::append_run(size_t k, const EventRun& fields) {
  if (n_ + k > capacity()) reserve(std::max({n_ + k, 2 * capacity(), size_t(64)}));
  size_t at = n_;
  n_ += k;
  if (runs_.empty() || !runs_.back().same_fields(fields)) runs_.push_back(fields);
  runs_.back().end = static_cast<uint32_t>(n_);
  return rows_.data() + at;
}

void RecordedEvents::push_back(const TraceEvent& e) {
  *append_run(1, EventRun{0, e.pid, e.tid, e.cpu, e.kind, e.timebase}) = {e.ts, e.channel, e.tuple};
}

void RecordedEvents::assign_zeros(size_t k) {
  clear();
  if (k > 0) std::fill_n(append_run(k, EventRun{}), k, EventEntry{});
}

TraceEvent RecordedEvents::at(size_t i) const {
  if (i >= n_) throw std::out_of_range("RecordedEvents::at: row beyond size()");
  auto run = std::upper_bound(runs_.begin(), runs_.end(), i, [](size_t row, const EventRun& r) { return row < r.end; });
  TraceEvent e;
  e.ts = rows_[i].tsc;
  e.channel = rows_[i].channel;
  e.tuple = rows_[i].tuple;
  e.pid = run->pid;
  e.tid = run->tid;
  e.cpu = run->cpu;
  e.kind = run->kind;
  e.timebase = run->timebase;
  return e;
}

void runs_of_rows(const TraceEvent* ev, size_t n, std::vector<EventRun>& out) {
  out.clear();
  for (size_t i = 0; i < n; ++i) {
    EventRun r{static_cast<uint32_t>(i + 1), ev[i].pid, ev[i].tid, ev[i].cpu, ev[i].kind, ev[i].timebase};
    if (!out.empty() && out.back().same_fields(r))
      out.back().end = r.end;
    else
      out.push_back(r);
  }
}

}  // namespace cptrace
