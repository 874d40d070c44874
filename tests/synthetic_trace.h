// Synthetic traces with exact, known contents for the analysis and export tests:
// written with the real TraceWriter, read back by the real reader. The TSC runs at
// exactly 1 GHz (one tick = one ns), so every expected duration is an integer.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/block_codec.h"
#include "trace/trace_writer.h"

namespace testutil {

struct SyntheticTrace {
  static constexpr uint64_t kOrigin = 1'000'000'000'000ull;  // TSC of the trace start
  static constexpr uint64_t kHz = 1'000'000'000ull;
  static constexpr uint64_t kRealtimeStart = 1'700'000'000'000'000'000ull;

  std::vector<std::pair<uint64_t, std::string>> channels;  // id -> name
  std::vector<cptrace::TraceEvent> events;  // in file order
  uint64_t stop = kOrigin;  // TSC of the stop instant
  uint32_t clock_width = 60;  // widest correlation bracket, ticks
  std::vector<uint64_t> seen, dropped;  // per CPU; empty: seen = events on that cpu
  size_t per_frame = 1000;

  void add(uint64_t channel, uint64_t ts, uint64_t tuple, uint16_t cpu = 0, uint32_t pid = 100, uint32_t tid = 101,
           uint8_t kind = uint8_t(cptrace::EventKind::User)) {
    cptrace::TraceEvent e;
    e.ts = ts;
    e.channel = channel;
    e.tuple = tuple;
    e.pid = pid;
    e.tid = tid;
    e.cpu = cpu;
    e.kind = kind;
    e.timebase = uint8_t(cptrace::Timebase::Tsc);
    events.push_back(e);
    if (ts > stop) stop = ts;
  }

  void write(const std::string& dir) const {
    using nlohmann::json;
    json meta = {{"format", "cptrace"},
                 {"node", "synth"},
                 {"machine", {{"host", "synthhost"}}},
                 {"start", {{"tsc", kOrigin}, {"mono_ns", kOrigin}, {"realtime_ns", kRealtimeStart}}},
                 {"complete", false}};
    cptrace::TraceWriter w(dir, meta, true);
    // TSC == CLOCK_MONOTONIC ns: the measured frequency is exactly 1 GHz.
    w.write(cptrace::encode_clock({{kOrigin, kOrigin, 40, 0}, {stop + 1000, stop + 1000, clock_width, 0}}));
    json ch = json::array();
    for (auto& [id, name] : channels) ch.push_back({{"id", id}, {"name", name}, {"pid", 100}});
    w.write(cptrace::encode_json(cptrace::FrameType::Channels, ch.dump(), uint32_t(ch.size())));
    for (size_t i = 0; i < events.size(); i += per_frame)
      w.write(cptrace::encode_events(events.data() + i, std::min(per_frame, events.size() - i)));
    std::vector<uint64_t> s = seen, d = dropped;
    if (s.empty()) {
      for (auto& e : events) {
        if (s.size() <= e.cpu) s.resize(e.cpu + 1, 0);
        s[e.cpu]++;
      }
      d.assign(s.size(), 0);
    }
    w.write(cptrace::encode_json(cptrace::FrameType::Counters, json({{"seen", s}, {"dropped", d}}).dump(), 1));
    meta["stop"] = {{"tsc", stop + 1000}};
    meta["tsc_hz"] = double(kHz);
    meta["complete"] = true;
    w.finish(meta);
  }
};

}  // namespace testutil
