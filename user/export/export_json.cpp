// Trace-event JSON export, one frame of events at a time.
#include "export/export_json.h"

#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "export/counter_periods.h"
#include "os/out_file.h"

namespace cptrace {

uint64_t export_json(const TraceReader& r, const Timeline& tl, const std::string& out) {
  OutFile f(out);
  nlohmann::json other = {{"tracer", "cptrace"},
                          {"node", r.trace_meta().node},
                          {"tsc_hz", tl.hz},
                          {"origin_tsc", std::to_string(tl.origin)},
                          {"dropped_events", r.counters().total_dropped()}};
  f.write(fmt::format("{{\"displayTimeUnit\":\"ns\",\"otherData\":{},\"traceEvents\":[\n", other.dump()));
  std::map<uint64_t, std::string> quoted;  // channel id -> JSON-escaped name, built once
  auto name_of = [&](uint64_t id, bool close) -> const std::string& {
    auto key = id ^ (close ? 0x8000000000000000ull : 0);
    auto it = quoted.find(key);
    if (it == quoted.end())
      it = quoted.emplace(key, nlohmann::json((close ? "close:" : "") + r.channel_name(id)).dump()).first;
    return it->second;
  };
  CounterPeriods periods(r.handler_changes());
  // ns as us with 3 decimals; the magnitude unsigned (-INT64_MIN is no int64).
  auto us = [](long long ns) {
    unsigned long long m = ns < 0 ? 0ull - static_cast<unsigned long long>(ns) : static_cast<unsigned long long>(ns);
    return fmt::format("{}{}.{:03d}", ns < 0 ? "-" : "", m / 1000, int(m % 1000));
  };
  std::string buf;
  uint64_t n = 0;
  r.for_each_batch([&](const std::vector<TraceEvent>& evs) {
    buf.clear();
    for (const TraceEvent& e : evs) {
      long long ns = std::llround(double(int64_t(e.ts - tl.origin)) * 1e9 / tl.hz);
      if (e.kind == uint8_t(EventKind::Count)) {
        // One CPU's count over one period: a complete event on thread "cpu" of pid 0
        // (a count has no process: the pid/tid of the record are those of whichever
        // event closed the period, or 0 for a period still open at stop).
        CounterRule rule = periods.at(e.channel, e.ts);
        fmt::format_to(std::back_inserter(buf),
                       "{}{{\"name\":{},\"cat\":\"counter_period\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":0,"
                       "\"tid\":{},\"args\":{{\"count\":\"{}\",\"period_ns\":\"{}\",\"tsc\":\"{}\",\"channel_id\":\"0x{"
                       ":016x}\",\"cpu\":{}}}}}",
                       n ? ",\n" : "", name_of(e.channel, false), us(ns), us((long long)rule.period_ns), e.cpu, e.tuple,
                       rule.period_ns, e.ts, e.channel, e.cpu);
        n++;
        continue;
      }
      bool close = e.kind == uint8_t(EventKind::ChannelClose);
      fmt::format_to(
          std::back_inserter(buf),
          "{}{{\"name\":{},\"cat\":\"{}\",\"ph\":\"i\",\"s\":\"t\",\"ts\":{},\"pid\":{},"
          "\"tid\":{},\"args\":{{\"tuple\":\"{}\",\"tsc\":\"{}\",\"channel_id\":\"0x{:016x}\",\"cpu\":{}}}}}",
          n ? ",\n" : "", name_of(e.channel, close), close ? "close" : "user", us(ns), e.pid, e.tid, e.tuple, e.ts,
          e.channel, e.cpu);
      n++;
    }
    f.write(buf);
  });
  // A process that ran in a container: its pid there as the process's label,
  // which trace viewers show beside the (host) pid.
  std::string labels;
  for (const auto& [pid, e] : r.pids().by_pid)
    if (auto ns = r.pids().container_pid(pid))
      fmt::format_to(std::back_inserter(labels),
                     "{}{{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"labels\":\"nspid {}\"}}}}",
                     n || !labels.empty() ? ",\n" : "", pid, *ns);
  f.write(labels);
  f.write("\n]}\n");
  f.close();
  return n;
}

}  // namespace cptrace
