// Synthetic multi-node recordings with exact ground truth, for translation tests
// and the translate benchmark. Every node's TSC is a known function of one true
// time t (ns): c(t) = offset + f * ((1 + skew) t + kink * max(0, t - t_kink)),
// readings are floor(c(t)). Messages (MinRTT rounds) take a known one-way delay
// (base + per-direction asymmetry + uniform jitter), so causality holds exactly;
// the truth of any event pair is computed from the instants of its readings.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/block_codec.h"
#include "cptrace.h"
#include "clock/clock_map.h"
#include "trace/sync_round.h"
#include "trace/trace_writer.h"

namespace synth {

struct Clock {
  std::string name;
  long double offset = 0;  // ticks at t = 0
  long double skew_ppm = 0;
  long double kink_ns = INFINITY, kink_ppm = 0;  // extra rate after kink_ns
  long double f = 2.5L;  // ticks per ns of the real oscillator

  long double at(long double t) const {
    long double extra = t > kink_ns ? (t - kink_ns) * kink_ppm * 1e-6L : 0;
    return offset + f * ((1 + skew_ppm * 1e-6L) * t + extra);
  }
  uint64_t read(long double t) const { return uint64_t(std::floor(at(t))); }
  // The true instant at which the clock showed value c.
  long double instant(long double c) const {
    long double r1 = f * (1 + skew_ppm * 1e-6L);
    long double t = (c - offset) / r1;
    if (t <= kink_ns) return t;
    return kink_ns + (c - at(kink_ns)) / (r1 + f * kink_ppm * 1e-6L);
  }
  // Ticks per ns on [t1, t2] (for the clock stream's frequency truth).
  long double ticks_per_ns(long double t) const {
    return f * (1 + skew_ppm * 1e-6L + (t > kink_ns ? kink_ppm * 1e-6L : 0));
  }
};

struct Recorded {
  int node = 0;
  uint64_t ts = 0;
};

class Cluster {
 public:
  Cluster(std::vector<Clock> clocks, uint64_t seed) : clocks_(std::move(clocks)), rng_(seed) {
    events_.resize(clocks_.size());
    rounds_.resize(clocks_.size());
  }
  const Clock& clock(int i) const { return clocks_[i]; }
  size_t size() const { return clocks_.size(); }

  // One-way delay from i to j (ns).
  long double base_ns = 60000, jitter_ns = 30000;
  std::map<std::pair<int, int>, long double> asym_ns;  // extra delay i -> j
  long double delay(int i, int j) {
    auto it = asym_ns.find({i, j});
    return base_ns + (it == asym_ns.end() ? 0 : it->second) +
           std::uniform_real_distribution<double>(0, double(jitter_ns))(rng_);
  }

  // `count` rounds from i to j starting at t0, `spacing_ns` apart.
  void rounds(int i, int j, const char* phase, long double t0, int count, long double spacing_ns) {
    for (int k = 0; k < count; ++k) {
      long double t1 = t0 + k * spacing_ns;
      long double t2 = t1 + delay(i, j);
      long double t3 = t2 + 15000 + std::uniform_real_distribution<double>(0, 10000)(rng_);
      long double t4 = t3 + delay(j, i);
      cptrace::SyncRound r;
      r.peer = clocks_[j].name;
      r.peer_addr = "10.77.0.1:4000";
      r.phase = phase;
      r.seq = seq_++;
      r.t1 = r.u1 = clocks_[i].read(t1);
      r.t2 = r.u2 = clocks_[j].read(t2);
      r.t3 = r.u3 = clocks_[j].read(t3);
      r.t4 = r.u4 = clocks_[i].read(t4);
      r.kernel_ok = r.user_ok = true;
      rounds_[i].push_back(r);
    }
  }
  // Start, stop (and optional stream) rounds for every ordered pair in `pairs`.
  void sync_all(const std::vector<std::pair<int, int>>& pairs, long double span_ns, int per_phase = 50,
                long double stream_every_ns = 0) {
    for (auto [i, j] : pairs) {
      rounds(i, j, "start", 1e6L, per_phase, 500000);
      rounds(i, j, "stop", span_ns - 30e6L, per_phase, 500000);
      if (stream_every_ns > 0)
        for (long double t = 40e6L; t < span_ns - 40e6L; t += stream_every_ns) rounds(i, j, "stream", t, 1, 0);
    }
  }

  // One event on node i at instant t; returns its reading.
  uint64_t event(int i, const std::string& channel, uint64_t tuple, long double t) {
    cptrace::TraceEvent e;
    e.ts = clocks_[i].read(t);
    e.channel = cp_channel_id(channel.c_str());
    e.tuple = tuple;
    e.pid = 100 + i;
    e.tid = 100 + i;
    e.kind = uint8_t(cptrace::EventKind::User);
    e.timebase = uint8_t(cptrace::Timebase::Tsc);
    channels_[i][e.channel] = channel;
    if (keep_truth) truth_[{channel, tuple}] = {i, e.ts};
    // Stamped on a CPU whose TSC runs ahead of the node's (truth stays the node's).
    auto sk = channel_skew.find(channel);
    if (sk != channel_skew.end()) e.ts = uint64_t(int64_t(e.ts) + sk->second);
    if (auto c = channel_cpu.find(channel); c != channel_cpu.end())
      e.timebase = uint8_t(cptrace::Timebase::TscOnCpu), e.cpu = c->second;
    events_[i].push_back(e);
    return e.ts;
  }

  // A pipeline A(0) -> B(1) -> C(2): n tuples, period_ns apart, from t0.
  void pipeline(uint64_t n, long double t0, long double period_ns) {
    for (uint64_t k = 0; k < n; ++k) {
      long double t = t0 + k * period_ns;
      event(0, "A.out", k, t);
      t += delay(0, 1);
      event(1, "B.in", k, t);
      t += 2000 + std::uniform_real_distribution<double>(0, 50000)(rng_);
      event(1, "B.out", k, t);
      t += delay(1, 2);
      event(2, "C.in", k, t);
    }
  }

  // The true duration (in reference-clock ticks) between two recorded events.
  long double truth_ticks(const std::string& c1, const std::string& c2, uint64_t tuple, int ref) const {
    const Recorded& a = truth_.at({c1, tuple});
    const Recorded& b = truth_.at({c2, tuple});
    long double ta = clocks_[a.node].instant(a.ts), tb = clocks_[b.node].instant(b.ts);
    return clocks_[ref].at(tb) - clocks_[ref].at(ta);
  }
  long double truth_ns(const std::string& c1, const std::string& c2, uint64_t tuple) const {
    const Recorded& a = truth_.at({c1, tuple});
    const Recorded& b = truth_.at({c2, tuple});
    return clocks_[b.node].instant(b.ts) - clocks_[a.node].instant(a.ts);
  }
  // The clock stream's CLOCK_MONOTONIC as a function of true time per node (default:
  // exactly t, an unadjusted clock), e.g. slewed like an NTP client. With raw_points
  // (the default, as recorders write them now) the points also carry
  // CLOCK_MONOTONIC_RAW == t; without, they are version-1 points (older recorders).
  std::map<int, std::function<long double(long double)>> mono_of;
  // Channels whose events are stamped on a CPU whose TSC is this many ticks off
  // the node's (cross-CPU skew), and what each node's meta.json adds.
  std::map<std::string, int64_t> channel_skew;
  // Channels whose stamps name the CPU they were read on (rdtscp: TscOnCpu).
  std::map<std::string, uint16_t> channel_cpu;
  std::map<int, nlohmann::json> extra_meta;
  bool raw_points = true;
  // Off for runs of millions of events (benchmarks): the truth map costs ~100 bytes per event.
  bool keep_truth = true;

  // The true reference-clock value of node i's reading ts.
  long double truth_ref(int i, uint64_t ts, int ref) const { return clocks_[ref].at(clocks_[i].instant(ts)); }

  // Writes node i's trace directory: clock stream every 100 ms over [0, span],
  // channel names, rounds, events (frames of at most frame_events).
  void write(int i, const std::string& dir, long double span_ns, size_t frame_events = 16384,
             const std::function<void(cptrace::TraceWriter&)>& more = nullptr) const {
    cptrace::TraceWriter w(dir, {{"node", clocks_[i].name}}, true);
    write_head(i, w, span_ns);
    if (!rounds_[i].empty())
      w.write(cptrace::encode_json(cptrace::FrameType::Sync, cptrace::sync_frame_json(rounds_[i]),
                                   uint32_t(rounds_[i].size())));
    const auto& ev = events_[i];
    for (size_t k = 0; k < ev.size(); k += frame_events)
      w.write(cptrace::encode_events(ev.data() + k, std::min(frame_events, ev.size() - k)));
    if (more) more(w);
    finish(i, w, span_ns);
  }

  // Node i's trace as a recorder writes it while it runs: the clock stream over
  // [0, span] and the channel names first, then per step of step_ns the rounds
  // node i initiated in it (a Sync frame) and its events in it (an Events frame).
  // Returns how many frames the file holds after each step.
  std::vector<size_t> write_steps(int i, const std::string& dir, long double span_ns, long double step_ns) const {
    cptrace::TraceWriter w(dir, {{"node", clocks_[i].name}}, true);
    size_t frames = write_head(i, w, span_ns);
    std::vector<size_t> out;
    size_t r = 0, e = 0;
    const auto& rs = rounds_[i];
    const auto& ev = events_[i];
    for (long double end = step_ns; end <= span_ns + step_ns / 2; end += step_ns) {
      std::vector<cptrace::SyncRound> step;
      for (; r < rs.size() && clocks_[i].instant(rs[r].t1) < end; ++r) step.push_back(rs[r]);
      if (!step.empty())
        w.write(cptrace::encode_json(cptrace::FrameType::Sync, cptrace::sync_frame_json(step), uint32_t(step.size()))),
            frames++;
      size_t e0 = e;
      while (e < ev.size() && clocks_[i].instant(ev[e].ts) < end) ++e;
      if (e > e0) w.write(cptrace::encode_events(ev.data() + e0, e - e0)), frames++;
      out.push_back(frames);
    }
    finish(i, w, span_ns);
    return out;
  }

  const std::vector<cptrace::TraceEvent>& events(int i) const { return events_[i]; }
  const std::vector<cptrace::SyncRound>& rounds_of(int i) const { return rounds_[i]; }

 private:
  // The clock stream and the channel names; the frames written.
  size_t write_head(int i, cptrace::TraceWriter& w, long double span_ns) const {
    w.write(cptrace::encode_clock(stream(i, span_ns)));
    nlohmann::json ch = nlohmann::json::array();
    auto chans = channels_.find(i);
    if (chans != channels_.end())
      for (auto& [id, name] : chans->second) ch.push_back({{"id", id}, {"name", name}, {"pid", 100 + i}});
    if (ch.empty()) return 1;
    w.write(cptrace::encode_json(cptrace::FrameType::Channels, ch.dump(), uint32_t(ch.size())));
    return 2;
  }
  // Node i's clock stream: a point every 100 ms over [0, span].
  std::vector<cptrace::ClockPoint> stream(int i, long double span_ns) const {
    std::vector<cptrace::ClockPoint> pts;
    auto mono = mono_of.find(i);
    for (long double t = 0; t <= span_ns; t += 100e6L) {
      cptrace::ClockPoint p{clocks_[i].read(t), uint64_t(mono == mono_of.end() ? t : std::floor(mono->second(t))), 20,
                            0};
      if (raw_points) {
        p.flags |= cptrace::kClockHasRaw;
        p.raw_tsc = p.tsc;
        p.raw_ns = uint64_t(t);
        p.raw_width_ticks = 20;
      }
      pts.push_back(p);
    }
    return pts;
  }
  void finish(int i, cptrace::TraceWriter& w, long double span_ns) const {
    // The nominal frequency as the recorder writes it: its stream's slope (here
    // against a perfect RAW clock, so f with the node's skew).
    nlohmann::json meta = {
        {"node", clocks_[i].name}, {"complete", true}, {"tsc_hz", cptrace::ClockMap(stream(i, span_ns)).tsc_hz()}};
    auto extra = extra_meta.find(i);
    if (extra != extra_meta.end()) meta.update(extra->second);
    w.finish(meta);
  }

 public:
  std::vector<cptrace::SyncRound>& node_rounds(int i) { return rounds_[i]; }

 private:
  std::vector<Clock> clocks_;
  std::mt19937_64 rng_;
  uint64_t seq_ = 0;
  std::vector<std::vector<cptrace::TraceEvent>> events_;
  std::vector<std::vector<cptrace::SyncRound>> rounds_;
  std::map<int, std::map<uint64_t, std::string>> channels_;
  std::map<std::pair<std::string, uint64_t>, Recorded> truth_;
};

}  // namespace synth
