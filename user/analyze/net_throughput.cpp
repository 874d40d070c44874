// Bytes per period per connection, one pass over the Net frames.
#include "analyze/net_throughput.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "tables/csv_util.h"
#include "trace/net_codec.h"

namespace cptrace {

namespace {

std::string endpoint(const cp_net_rec& r, bool local) {
  std::string a = net_addr(r, local);
  if (r.family == 10) a = "[" + a + "]";
  return fmt::format("{}:{}", a, local ? r.sport : r.dport);
}

// Bytes of one connection and direction per period, and its calls (those kept).
struct Bins : PeriodBins {
  uint64_t calls = 0;
  void add(int64_t idx, uint64_t n) { calls += PeriodBins::add(idx, n); }
};

}  // namespace

NetThroughput compute_net_throughput(const TraceReader& r, const Timeline& tl, uint64_t period, double period_ms) {
  if (r.net_event_count() == 0) throw std::runtime_error(r.events_path() + ": no network events (record with --net)");
  std::map<std::pair<std::string, std::string>, Bins> bins;  // (connection, direction)
  uint64_t last_ts = tl.end;
  int64_t lo = 0, hi = 0;  // every event's period, kept even where Bins leaves it out
  r.for_each_net_event([&](const NetEvent& e) {
    const cp_net_rec& n = e.r;
    if (n.kind != CP_NET_SOCK_SEND && n.kind != CP_NET_SOCK_RECV) return;  // packets: not app bytes
    // Socket events carry the local end as saddr/sport, the remote one as daddr/dport.
    std::string conn = fmt::format("{} {} <-> {}", net_proto_name(n.proto), endpoint(n, true), endpoint(n, false));
    int64_t idx = period_index(tl, e.ts, period);
    bins[{conn, n.kind == CP_NET_SOCK_SEND ? "send" : "recv"}].add(idx, n.len);
    lo = std::min(lo, idx), hi = std::max(hi, idx);
    if (int64_t(e.ts - last_ts) > 0) last_ts = e.ts;
  });

  NetThroughput t;
  t.tl = tl;
  t.period = period;
  t.period_ms = period_ms;
  hi = std::max(hi, period_index(tl, last_ts, period));
  for (const auto& [k, b] : bins) {
    lo = std::min(lo, b.first);
    hi = std::max(hi, b.first + int64_t(b.counts.size()) - 1);
  }
  if (periods_between(lo, hi) > kMaxThroughputPeriods) refuse_throughput_span(tl, period, period_ms, lo, hi);
  t.first = lo;
  t.periods = size_t(hi - lo + 1);
  for (auto& [k, b] : bins) {  // std::map: already sorted by connection, then direction
    ConnectionSeries s{k.first, k.second, std::vector<uint64_t>(t.periods, 0), 0, b.calls};
    for (size_t i = 0; i < b.counts.size(); ++i) {
      s.bytes[size_t(b.first - lo) + i] = b.counts[i];
      s.total += b.counts[i];
    }
    t.series.push_back(std::move(s));
  }
  return t;
}

nlohmann::json net_throughput_json(const NetThroughput& t) {
  nlohmann::json j = {{"period_ms", t.period_ms},
                      {"period_ticks", t.period},
                      {"tsc_hz", t.tl.hz},
                      {"origin_tsc", t.tl.origin},
                      {"first_period", t.first},
                      {"periods", t.periods},
                      {"connections", nlohmann::json::array()}};
  for (const auto& s : t.series)
    j["connections"].push_back({{"connection", s.connection},
                                {"direction", s.direction},
                                {"total_bytes", s.total},
                                {"calls", s.calls},
                                {"bytes", s.bytes}});
  return j;
}

int run_net_throughput(const std::string& dir, double period_ms, Output output) {
  auto r = open_trace(dir);
  Timeline tl = trace_timeline(*r);
  NetThroughput t = compute_net_throughput(*r, tl, period_ticks(tl, period_ms, "--period"), period_ms);
  if (output == Output::Json) {
    fmt::print("{}\n", net_throughput_json(t).dump(2));
  } else if (output == Output::Csv) {
    fmt::print("period,start_s,connection,direction,bytes\n");
    for (size_t i = 0; i < t.periods; ++i)
      for (const auto& s : t.series)
        fmt::print("{},{:.9f},{},{},{}\n", t.first + int64_t(i), t.period_start_s(i), csv_field(s.connection),
                   s.direction, s.bytes[i]);
  } else {
    fmt::print("# application bytes per {:g} ms period per connection (socket send/recv events)\n", period_ms);
    for (const auto& s : t.series) {
      fmt::print("{}  {}  total {} bytes in {} calls\n", s.connection, s.direction, s.total, s.calls);
      for (size_t i = 0; i < t.periods; ++i)
        if (s.bytes[i]) fmt::print("  {:12.6f} s  {:12}\n", t.period_start_s(i), s.bytes[i]);
    }
  }
  return damaged_trace_exit(*r, "bytes cover the events before it");
}

}  // namespace cptrace
