// `cptrace throughput`: user events per period per channel. Periods are aligned
// to the trace origin (trace_timeline.h) and cover the whole trace, from the
// origin (or the earliest event, if one precedes it) to the stop instant (or the
// last event), so an idle period is a 0, not a gap.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tables/output_form.h"
#include "trace/trace_timeline.h"

namespace cptrace {

struct ChannelSeries {
  uint64_t id = 0;
  std::string name;
  std::vector<uint64_t> counts;  // counts[i]: events in period first + i
  uint64_t total = 0;
};

struct Throughput {
  Timeline tl;
  uint64_t period = 0;  // ticks
  double period_ms = 0;  // as asked
  int64_t first = 0;  // index of the first period (negative if events precede the origin)
  size_t periods = 0;
  std::vector<ChannelSeries> channels;  // sorted by name
  double period_start_s(size_t i) const { return tl.ticks_to_s(double(first + int64_t(i)) * double(period)); }
};

// The widest table compute_throughput() builds, in periods (period_ticks()
// applies the same bound to the recording itself). Events stamped far outside
// the recording (a bad batch timestamp, 0 or UINT64_MAX) would otherwise make
// the table, and the memory, as wide as the 64-bit time range.
constexpr uint64_t kMaxThroughputPeriods = 10'000'000;

// Periods from lo to hi inclusive, saturating (2^64 periods do not fit).
inline uint64_t periods_between(int64_t lo, int64_t hi) {
  uint64_t n = uint64_t(hi) - uint64_t(lo);
  return n == UINT64_MAX ? n : n + 1;
}

struct TooManyPeriods : std::runtime_error {
  TooManyPeriods(const std::string& what, double span_ms) : std::runtime_error(what), span_ms(span_ms) {}
  double span_ms;  // from the earliest period to the latest, events and recording
};

// Throws TooManyPeriods for a table from period lo to hi, saying how far the events reach.
[[noreturn]] void refuse_throughput_span(const Timeline& tl, uint64_t period, double period_ms, int64_t lo, int64_t hi);

// Counts indexed by period, growing in either direction as they arrive, but
// never wider than kMaxThroughputPeriods: a count beyond that is left out (the
// tables built on it refuse such a span anyway). Events per channel here, bytes
// per connection in net_throughput.
struct PeriodBins {
  int64_t first = 0;
  std::vector<uint64_t> counts;
  // False when idx is left out.
  bool add(int64_t idx, uint64_t n);
};

// The counting of compute_throughput(), fed one event at a time, so that a view
// of a trace still being written (`cptrace top`) cuts the same periods and builds
// the same table. Counts are kept by period index, so they stay valid for any
// timeline and period that give each counted event the same index.
class ThroughputCounter {
 public:
  explicit ThroughputCounter(std::optional<uint64_t> only = std::nullopt) : only_(only) {}
  // A user event (other kinds and other channels than `only` are ignored), ts in TSC.
  void add(const Timeline& tl, uint64_t period, const TraceEvent& e);
  // `n` events of `channel` in period `idx`, already placed.
  void add_at(uint64_t channel, int64_t idx, uint64_t n = 1);
  // Adds every count of `other` (same `only`).
  void merge(const ThroughputCounter& other);
  // The table from the origin (or the earliest event) to max(tl.end, last event),
  // with a zero row for each channel of `channels` without events. Throws
  // TooManyPeriods like compute_throughput().
  Throughput table(const Timeline& tl, uint64_t period, double period_ms,
                   const std::map<uint64_t, ChannelInfo>& channels) const;

 private:
  std::optional<uint64_t> only_;
  std::map<uint64_t, PeriodBins> bins_;
  int64_t lo_ = 0, hi_ = 0;  // every event's period, kept even where Bins leaves it out
};

// One streaming pass. `only`: restrict to one channel id. Channels of the
// channel table without events are listed with all-zero counts. Throws
// TooManyPeriods (before allocating the table) when the events and the recording
// span more than kMaxThroughputPeriods periods.
Throughput compute_throughput(const TraceReader& r, const Timeline& tl, uint64_t period, double period_ms,
                              std::optional<uint64_t> only = std::nullopt);
nlohmann::json throughput_json(const Throughput& t);

struct ThroughputOptions {
  std::string dir;
  std::string channel;  // only this channel (not with net)
  double period_ms = 1000;
  Output output = Output::Text;
  bool net = false;  // bytes per connection instead (net_throughput.h)
};

// `cptrace throughput`: events per period per channel as text, CSV or JSON; with
// `net`, application bytes per period per connection.
int run_throughput(const ThroughputOptions& o);

}  // namespace cptrace
