// `cptrace top`: follow a trace directory while it is written and show its counts.
#include "analyze/top.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "analyze/live_view.h"
#include "analyze/run_view.h"
#include "trace/trace_tail.h"
#include "os/say.h"

namespace cptrace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// The recorder creates DIR, then events.cpt in it; a run gets RUN/NODE/events.cpt.
// Waits for either, at most wait_s. Returns events.cpt's path, or "" for a run.
std::string wait_for_trace(const std::string& dir, double wait_s) {
  auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
  fs::path events = fs::path(dir) / "events.cpt";
  for (bool told = false;; told = true) {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
      throw std::runtime_error(dir + ": not a trace directory (not a directory)");
    if (fs::exists(events, ec)) return events.string();
    if (holds_run(dir)) return "";  // run_view.h decides what a run is
    bool have_dir = fs::exists(dir, ec);
    if (Clock::now() >= deadline)
      throw std::runtime_error(have_dir
                                   ? fmt::format("{}: not a cptrace trace directory (no events.cpt in it, nor "
                                                 "node directories holding a recording, after {} s, --wait)",
                                                 dir, wait_s)
                                   : fmt::format("{}: no such directory after waiting {} s (--wait)", dir, wait_s));
    if (!told) say("waiting up to {:g} s for {}", wait_s, events.string());
    sleep_s(0.05);
  }
}

void print_text(const std::string& dir, const json& s, bool tty) {
  std::string out = tty ? "\x1b[H\x1b[2J" : "";
  out += fmt::format("cptrace top {}  {}  trace {:.1f} s  read {} bytes\n", dir, s.value("state", ""),
                     s.value("trace_s", 0.0), s.value("bytes_read", uint64_t(0)));
  out += fmt::format("events {}  seen {}  dropped {}  filtered {}\n\n", s.value("events", uint64_t(0)),
                     s.value("seen", uint64_t(0)), s.value("dropped", uint64_t(0)), s.value("filtered", uint64_t(0)));
  out += fmt::format("{:<32} {:>14} {:>14}\n", "channel", "events/s", "total");
  for (const json& c : s.value("rates", json::array()))
    out += fmt::format("{:<32} {:>14.0f} {:>14}\n", c["name"].get<std::string>(), c["per_s"].get<double>(),
                       c["total"].get<uint64_t>());
  if (!s.value("pairs", json::array()).empty())
    out += fmt::format("\n{:<40} {:>9} {:>11} {:>11} {:>11} {:>11}\n", "latency (same node, us)", "count", "p50", "p90",
                       "p99", "max");
  for (const json& p : s.value("pairs", json::array()))
    out += fmt::format("{:<40} {:>9} {:>11.3f} {:>11.3f} {:>11.3f} {:>11.3f}\n",
                       p["from"].get<std::string>() + " -> " + p["to"].get<std::string>(), p["count"].get<uint64_t>(),
                       p["p50_s"].get<double>() * 1e6, p["p90_s"].get<double>() * 1e6, p["p99_s"].get<double>() * 1e6,
                       p["max_s"].get<double>() * 1e6);
  for (const json& p : s.value("pairs", json::array()))
    if (p.value("windowed", false))
      out += fmt::format("  {} -> {}: beyond --memory, paired as events come (repeats of a paired id are new ids)\n",
                         p["from"].get<std::string>(), p["to"].get<std::string>());
  fmt::print("{}", out);
  if (!tty) fmt::print("\n");
  fflush(stdout);
}

void emit(const TopOptions& o, const json& s) {
  if (o.json) {
    fmt::print("{}\n", s.dump());
    fflush(stdout);
  } else {
    print_text(o.dir, s, isatty(STDOUT_FILENO));
  }
}

// The last refresh of a completed recording: its whole table is throughput's.
int finish(const TopOptions& o, const TraceTail& tail, const LiveView& view, const json& meta, json s) {
  if (tail.offset() < tail.file_bytes()) {
    say("{} at byte {}: {} (counts cover the frames before it)", tail.path(), tail.offset(), tail.pending_reason());
    return 2;
  }
  bool recounted = false;
  Throughput t = view.final_table(tail, meta, recounted);
  s["throughput"] = throughput_json(t);
  s["recounted"] = recounted;
  emit(o, s);
  return 0;
}

double ns_or_ticks_us(const json& v) {
  return v.contains("ns") ? v["ns"].get<double>() / 1e3 : v["ticks"].get<double>();
}

std::string bounded(const json& p, const char* key) {
  if (!p.contains(key)) return "-";
  const json& v = p[key];
  bool ns = v.contains("ns");
  double k = ns ? 1e3 : 1;
  return fmt::format("{:.1f} [{:.1f}, {:.1f}]", ns_or_ticks_us(v), v[ns ? "ns_lo" : "ticks_lo"].get<double>() / k,
                     v[ns ? "ns_hi" : "ticks_hi"].get<double>() / k);
}

void print_run_text(const std::string& dir, const json& s, bool tty) {
  std::string out = tty ? "\x1b[H\x1b[2J" : "";
  out += fmt::format("cptrace top {}  {}  {} nodes\n\n", dir, s.value("state", ""), s["nodes"].size());
  out += fmt::format("{:<16} {:>12} {:>12} {:>10} {:>8}\n", "node", "events/s", "events", "dropped", "rounds");
  for (const json& n : s["nodes"])
    out += fmt::format("{:<16} {:>12.0f} {:>12} {:>10} {:>8}\n", n["node"].get<std::string>(), n["per_s"].get<double>(),
                       n["events"].get<uint64_t>(), n["dropped"].get<uint64_t>(), n["rounds"].get<uint64_t>());
  for (const json& p : s["pairs"]) {
    bool ns = p.contains("p50") && p["p50"].contains("ns");
    out += fmt::format("\n{} -> {}  {} tuples (on {}'s clock, {}; est [strict bound])\n", p["from"].get<std::string>(),
                       p["to"].get<std::string>(), p["count"].get<uint64_t>(), p.value("reference", ""),
                       ns ? "us" : "ticks");
    for (const char* k : {"p50", "p90", "p99", "max"}) out += fmt::format("  {:<4} {}\n", k, bounded(p, k));
  }
  for (const json& f : s.value("flows", json::array())) {
    bool ns = f.contains("p50") && f["p50"].contains("ns");
    out += fmt::format("\n{}  {} -> {}  {} packets bounded of {} matched (one-way delay on {}'s clock, {})\n",
                       f["flow"].get<std::string>(), f["from"].get<std::string>(), f["to"].get<std::string>(),
                       f["count"].get<uint64_t>(), f["matched"].get<uint64_t>(), f.value("reference", ""),
                       ns ? "us" : "ticks");
    for (const char* k : {"p50", "p90", "p99", "max"}) out += fmt::format("  {:<4} {}\n", k, bounded(f, k));
  }
  if (!s["starting"].empty()) out += fmt::format("\nstarting: {}\n", s["starting"].dump());
  for (const json& w : s["problems"]) out += "note: " + w.get<std::string>() + "\n";
  fmt::print("{}", out);
  if (!tty) fmt::print("\n");
  fflush(stdout);
}

// `top RUN`: the nodes' traces under RUN, until all of them are complete.
int top_run(const TopOptions& o) {
  RunViewOptions ro;
  ro.pairs = o.pairs;
  ro.reference = o.reference;
  ro.max_drift_ppm = o.max_drift_ppm;
  ro.flows = o.flows;
  RunView view(o.dir, ro);
  auto grew_at = Clock::now();
  uint64_t last_size = 0;
  for (long n = 1;; ++n) {
    view.poll();
    // A node still starting (cluster.json) is not gone: many nodes take seconds.
    if (view.file_bytes() != last_size || !view.starting().empty()) {
      last_size = view.file_bytes();
      grew_at = Clock::now();
    }
    json s = view.snapshot();
    s["refresh"] = n;
    bool complete = s["complete"].get<bool>();
    s["state"] = complete ? "complete" : "recording";
    bool gone = !complete && Clock::now() - grew_at > std::chrono::duration<double>(o.gone_s);
    if (gone) s["state"] = "recorders gone";
    std::string damage = view.damage();
    if (o.json) {
      fmt::print("{}\n", s.dump());
      fflush(stdout);
    } else {
      print_run_text(o.dir, s, isatty(STDOUT_FILENO));
    }
    if (!damage.empty()) {
      say("{} (the view covers the frames before it)", damage);
      return 2;
    }
    if (complete) return 0;
    if (gone) {
      std::string names;
      for (const std::string& n : view.incomplete()) names += (names.empty() ? "" : ", ") + n;
      say("no trace under {} has grown for {:g} s and not all are complete (incomplete: {}): "
          "recorders stopped without finishing",
          o.dir, o.gone_s, names);
      return 3;
    }
    if (o.iterations > 0 && n >= o.iterations) return 0;
    sleep_s(o.interval_ms / 1e3);
  }
}

}  // namespace

int run_top(const TopOptions& o) {
  if (!(o.interval_ms >= 1) || !std::isfinite(o.interval_ms))
    throw std::runtime_error(fmt::format("--interval {}: must be at least 1 ms", o.interval_ms));
  if (!(o.wait_s >= 0) || !(o.gone_s > 0)) throw std::runtime_error("--wait and --gone-after must be positive");
  std::string events = wait_for_trace(o.dir, o.wait_s);
  if (events.empty()) return top_run(o);
  if (o.flows)
    throw std::runtime_error("--flows: " + o.dir + " is one node's trace; flows are between the nodes of a run");
  LiveView view(o.period_ms, o.pairs, o.budget);
  TraceTail tail(events);
  json meta = json::object();
  TraceMeta info;
  auto grew_at = Clock::now();
  uint64_t last_size = 0;
  for (long n = 1;; ++n) {
    reread_trace_meta(o.dir, meta, info);  // before the frames: complete means every frame is already written
    const bool complete = info.complete;
    tail.poll([&](const std::vector<TraceEvent>& evs) { view.add(evs); });
    view.update(tail, meta);
    if (tail.file_bytes() != last_size) {
      last_size = tail.file_bytes();
      grew_at = Clock::now();
    }
    json s = view.snapshot(tail);
    s["refresh"] = n;
    s["complete"] = complete;
    s["state"] = complete ? "complete" : "recording";
    if (complete) return finish(o, tail, view, meta, std::move(s));
    if (Clock::now() - grew_at > std::chrono::duration<double>(o.gone_s)) {
      s["state"] = "recorder gone";
      emit(o, s);
      say("{} has not grown for {:g} s and meta.json is not complete: the recorder "
          "stopped without finishing the trace",
          tail.path(), o.gone_s);
      return 3;
    }
    emit(o, s);
    if (o.iterations > 0 && n >= o.iterations) return 0;
    sleep_s(o.interval_ms / 1e3);
  }
}

}  // namespace cptrace
