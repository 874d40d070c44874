// `cptrace info`: see trace_info.h.
#include "analyze/trace_info.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/clock_adjust_summary.h"
#include "trace/handler_history.h"
#include "trace/net_codec.h"
#include "trace/sync_round_summary.h"
#include "trace/trace_reader.h"
#include "trace/tsc_skew_history.h"

namespace cptrace {

namespace {

// summarize_rounds() as text: one line per peer and phase.
void print_sync_summary(const nlohmann::json& summary) {
  fmt::print("{:<20} {:<22} {:<7} {:>8} {:>10} {:>14} {:>14}\n", "MinRTT peer", "address", "phase", "rounds",
             "kernel_ok", "kernel min us", "user min us");
  auto num = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("-") : fmt::format("{:.3f}", v.get<double>());
  };
  for (auto& [peer, per] : summary.items())
    for (const char* ph : {"start", "stream", "stop", "all"}) {
      if (!per.contains(ph)) continue;
      const auto& p = per[ph];
      fmt::print("{:<20} {:<22} {:<7} {:8} {:10} {:>14} {:>14}\n", peer, per.value("addr", ""), ph,
                 p["rounds"].get<uint64_t>(), p["kernel_ok"].get<uint64_t>(), num(p["kernel_min_us"]),
                 num(p["user_min_us"]));
    }
}

struct ChannelStats {
  uint64_t events = 0, first = UINT64_MAX, last = 0, counted = 0;  // counted: `counter` series
};

struct EventTotals {
  std::map<uint64_t, ChannelStats> per;
  uint64_t first = UINT64_MAX, last = 0, n = 0;
  uint64_t series = 0;
};

EventTotals count_events(const TraceReader& r) {
  EventTotals t;
  r.for_each_event([&](const TraceEvent& e) {
    auto& c = t.per[e.channel];
    if (e.kind == uint8_t(EventKind::Count)) {  // a series point, not an event
      c.counted += e.tuple;
      t.series++;
      return;
    }
    if (e.kind == uint8_t(EventKind::User)) c.events++;
    c.first = std::min(c.first, e.ts);
    c.last = std::max(c.last, e.ts);
    t.first = std::min(t.first, e.ts);
    t.last = std::max(t.last, e.ts);
    t.n++;
  });
  return t;
}

// Where the packets were stamped: the points the recorder attached (meta.json) and
// how many receives each stamped (every record says where it was stamped).
nlohmann::json net_stamps(const TraceReader& r) {
  nlohmann::json j = {{"tx_stamp", r.meta().value("/net/tx_stamp"_json_pointer, "net_dev_start_xmit")},
                      {"rx_stamp", r.meta().value("/net/rx_stamp"_json_pointer, nlohmann::json::array())}};
  std::map<std::string, uint64_t> rx;
  uint64_t grew = 0;
  r.for_each_net_event([&](const NetEvent& e) {
    if (e.r.kind != CP_NET_PKT_RX) return;
    rx[net_stamp_name(e.r.kind, e.r.stamp_at)]++;
    grew += (e.r.flags & CP_NETF_RX_GREW) != 0;
  });
  j["rx_stamped_at"] = rx;
  j["rx_grew_after_early_stamp"] = grew;
  return j;
}

// The --json summary; the text form prints from it too.
nlohmann::json summary_json(const std::string& dir, const TraceReader& r, const EventTotals& t) {
  const Counters& k = r.counters();
  double hz = r.clock_map().tsc_hz();
  double span_s = (t.n && hz > 0) ? double(t.last - t.first) / hz : 0;
  uint64_t file_bytes = r.file_bytes();
  double ratio = file_bytes ? double(r.raw_event_bytes()) / file_bytes : 0;
  nlohmann::json j = {{"dir", dir},
                      {"node", r.trace_meta().node},
                      {"host", r.meta().value("/machine/host"_json_pointer, "")},
                      {"complete", r.trace_meta().complete},
                      {"events", t.n},
                      {"seen", k.total_seen()},
                      {"dropped", k.total_dropped()},
                      {"dropped_per_cpu", k.dropped},
                      {"filtered", k.total_filtered()},
                      {"counter_series_points", t.series},
                      {"handler_changes", r.handler_changes()},
                      {"accounted", t.n + k.total_dropped() + k.total_filtered() == k.total_seen()},
                      {"span_s", span_s},
                      {"tsc_hz", hz},
                      {"clock_points", r.clock().size()},
                      {"file_bytes", file_bytes},
                      {"raw_event_bytes", r.raw_event_bytes()},
                      {"compression_ratio", ratio},
                      {"frames", r.frame_count()}};
  for (auto& [id, c] : t.per)
    j["channels"].push_back({{"id", id},
                             {"name", r.channel_name(id)},
                             {"events", c.events},
                             {"counted", c.counted},
                             {"first_ts", c.first},
                             {"last_ts", c.last}});
  for (const auto& [pid, e] : r.pids().by_pid)
    j["processes"].push_back({{"pid", pid},
                              {"nspid", e.nspid},
                              {"pidns", e.pidns},
                              {"container", e.pidns != r.pids().recorder_pidns},
                              {"cgroup", e.cgroup},
                              {"container_id", e.container_id}});
  if (!r.sync_rounds().empty()) j["sync"] = summarize_rounds(r.sync_rounds(), hz);
  if (r.net_event_count() || !r.net_counters().seen.empty()) {
    const Counters& nk = r.net_counters();
    j["net"] = {
        {"events", r.net_event_count()}, {"seen", nk.total_seen()},
        {"dropped", nk.total_dropped()}, {"seen_per_cpu", nk.seen},
        {"dropped_per_cpu", nk.dropped}, {"accounted", r.net_event_count() + nk.total_dropped() == nk.total_seen()},
        {"stamps", net_stamps(r)}};
  }
  j["clock_adjustments"] = summarize_clock_adjustments(r).to_json();
  if (r.meta().contains("clock_discipline")) j["clock_discipline"] = r.meta()["clock_discipline"];
  if (r.clock_map().points().size() >= 2) j["clock_model"] = clock_model_json(r.clock_map());
  if (r.meta().contains("tsc")) j["tsc"] = r.meta()["tsc"];
  if (r.meta().contains("write_error")) j["write_error"] = r.meta()["write_error"];
  if (r.error()) j["error"] = r.error()->what();
  return j;
}

void print_net_stamps(const nlohmann::json& st) {
  std::string rx_points;
  for (const auto& p : st["rx_stamp"]) rx_points += (rx_points.empty() ? "" : ", ") + p.get<std::string>();
  fmt::print("net stamps tx at {}; rx at {}\n", st["tx_stamp"].get<std::string>(),
             rx_points.empty() ? "netif_receive_skb (recorder did not say)" : rx_points);
  if (st["rx_stamped_at"].empty()) return;
  std::string counts;
  for (const auto& [at, n] : st["rx_stamped_at"].items())
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n.get<uint64_t>(), at);
  fmt::print("           receives stamped: {}", counts);
  if (uint64_t g = st["rx_grew_after_early_stamp"].get<uint64_t>())
    fmt::print(" ({} of them at netif_receive_skb because GRO merged later segments in)", g);
  fmt::print("\n");
}

// The clocksource, its reading step, and how the kernel stamps' conversion went:
// segments that fell back, and why (clock_bounds.h).
void print_clock_model(const nlohmann::json& j) {
  const nlohmann::json cd = j.value("clock_discipline", nlohmann::json::object());
  if (cd.contains("quantum_ns"))
    fmt::print("clock      clocksource {}, reads in steps of {} ns (RAW {} ns){}\n", cd.value("clocksource", "?"),
               cd.value("quantum_ns", uint64_t(1)), cd.value("raw_quantum_ns", uint64_t(1)),
               cd.value("clocksource_switches", nlohmann::json::array()).empty()
                   ? ""
                   : fmt::format("; {} clocksource switches", cd["clocksource_switches"].size()));
  if (!j.contains("clock_model")) return;
  const nlohmann::json& m = j["clock_model"];
  uint64_t v = m.value("violated", uint64_t(0)), c = m.value("crowded", uint64_t(0)),
           d = m.value("departed", uint64_t(0));
  fmt::print(
      "clock      kernel stamps: {} of {} segments bounded without the model ({} violated, {} crowded, {} "
      "where CLOCK_MONOTONIC_RAW left its TSC line); RAW checked {} segments\n",
      v + c + d, m.value("segments", uint64_t(0)), v, c, d, m.value("raw_checked", uint64_t(0)));
  // Each TSC rate change splits RAW's line: ns durations across it are widened
  // by the two rates' difference (docs/clock.md).
  for (const nlohmann::json& p : m.value("tsc_pieces", nlohmann::json::array()))
    fmt::print("clock      TSC {:.6f} MHz from CLOCK_MONOTONIC {} to {} ns\n", p.value("hz", 0.0) / 1e6,
               p.value("from_mono_ns", uint64_t(0)), p.value("to_mono_ns", uint64_t(0)));
}

// The clock's NTP state at start and every change the recording saw; "none" when
// it saw none (a trace from before they were recorded says so instead).
void print_clock_adjustments(const nlohmann::json& j) {
  const auto& c = j["clock_adjustments"];
  bool recorded = j.contains("clock_discipline") || !c["state_at_start"].get<std::string>().empty();
  if (!recorded) {
    fmt::print("clock adj  not recorded (trace written before clock adjustments were)\n");
    return;
  }
  if (!c["state_at_start"].get<std::string>().empty())
    fmt::print("clock      NTP at start: {}\n", c["state_at_start"].get<std::string>());
  if (j.contains("clock_discipline") && !j["clock_discipline"].value("syscalls_watched", true))
    fmt::print("clock      clock-adjusting syscalls not watched ({}): changes seen only at correlation points\n",
               j["clock_discipline"].value("why_not_watched", ""));
  print_clock_model(j);
  if (c["changes"].empty()) fmt::print("clock adj  none\n");
  for (const auto& l : c["changes"])
    fmt::print("clock adj  {:+11.6f} s  {}\n", l["at_s"].get<double>(), l["text"].get<std::string>());
}

// "[lo, hi] ticks (at most N ns apart)", or why there is no interval.
std::string skew_text(const nlohmann::json& iv, double hz) {
  if (!iv.is_array() || iv.size() != 2) return "not measured on every CPU";
  int64_t lo = iv[0].get<int64_t>(), hi = iv[1].get<int64_t>();
  double ns = hz > 0 ? double(std::max(-lo, hi)) * 1e9 / hz : 0;
  return fmt::format("[{}, {}] ticks (|skew| <= {:.1f} ns)", lo, hi, ns);
}

// What the periodic measures saw: the TSC checked by cptrace itself, whatever
// the kernel's verdict (trace/tsc_skew_history.h).
void print_skew_watch(const TscSkewHistory& h, double hz) {
  if (!h.watched()) return;
  std::string incomplete = h.periodic_incomplete ? fmt::format(" ({} missed some CPU)", h.periodic_incomplete) : "";
  if (h.moved == 0)
    fmt::print("tsc check  {} measures while recording{}: every CPU's interval met its start and stop ones\n",
               h.periodic, incomplete);
  else
    fmt::print(
        "tsc check  {} measures while recording{}: {} CPU interval(s) left their start and stop ones (the TSC "
        "moved between CPUs): every stamp carries |skew| <= {:.1f} ns\n",
        h.periodic, incomplete, h.moved, hz > 0 ? double(h.err) * 1e9 / hz : 0.0);
}

// The kernel's verdict on the TSC when recording, and the skew between CPUs'
// counters measured at start and stop (meta.json "tsc").
void print_tsc_trust(const nlohmann::json& j) {
  if (!j.contains("tsc")) {
    fmt::print("tsc        verdict and skew not recorded (trace written before they were)\n");
    return;
  }
  const auto& t = j["tsc"];
  fmt::print("tsc        {} by the kernel: {}{}\n", t.value("verdict", "unknown"), t.value("reason", ""),
             t.value("accepted_unstable", false) ? "  [recorded anyway: --accept-unstable-tsc]" : "");
  double hz = j["tsc_hz"].get<double>();
  nlohmann::json sk = t.value("skew_ticks", nlohmann::json::object());
  nlohmann::json stop = sk.value("at_stop", nlohmann::json());
  bool stop_measured = !t.value("/skew/at_stop"_json_pointer, nlohmann::json()).is_null();
  fmt::print("tsc skew   TSC_k - TSC_ref at start {}, at stop {}\n",
             skew_text(sk.value("at_start", nlohmann::json()), hz),
             stop_measured ? skew_text(stop, hz) : "not measured (the recorder did not finish)");
  print_skew_watch(TscSkewHistory::from_meta(j), hz);
}

void print_summary(const std::string& dir, const TraceReader& r, const EventTotals& t, const nlohmann::json& j) {
  const Counters& k = r.counters();
  fmt::print("trace      {} (node {}, host {}){}\n", dir, j["node"].get<std::string>(), j["host"].get<std::string>(),
             j["complete"].get<bool>() ? "" : "  [recorder did not finish]");
  fmt::print("events     {} recorded, {} dropped, {} filtered by handlers, {} seen by the probes{}\n", t.n,
             k.total_dropped(), k.total_filtered(), k.total_seen(),
             j["accounted"].get<bool>() ? "" : "  [MISMATCH: recorded + dropped + filtered != seen]");
  if (j.contains("net"))
    fmt::print("network    {} recorded, {} dropped, {} seen by the programs{}\n", r.net_event_count(),
               r.net_counters().total_dropped(), r.net_counters().total_seen(),
               j["net"]["accounted"].get<bool>() ? "" : "  [MISMATCH: recorded + dropped != seen]");
  if (j.contains("net")) print_net_stamps(j["net"]["stamps"]);
  fmt::print("span       {:.6f} s   TSC {:.6f} GHz (measured, {} correlation points)\n", j["span_s"].get<double>(),
             j["tsc_hz"].get<double>() / 1e9, r.clock().size());
  fmt::print("size       {} bytes in {} frames, {:.1f}x smaller than raw events ({} bytes)\n", r.file_bytes(),
             r.frame_count(), j["compression_ratio"].get<double>(), r.raw_event_bytes());
  fmt::print("{:<18} {:<28} {:>12} {:>12}\n", "channel id", "name", "events", "counted");
  for (auto& [id, c] : t.per) fmt::print("{:016x}   {:<28} {:12} {:12}\n", id, r.channel_name(id), c.events, c.counted);
  // Host processes are known by their one pid; a container's by two.
  for (const auto& [pid, e] : r.pids().by_pid)
    if (e.pidns != r.pids().recorder_pidns)
      fmt::print("process    pid={} nspid={} (pid namespace {}){}{}\n", pid, e.nspid, e.pidns,
                 e.cgroup.empty() ? "" : " cgroup " + e.cgroup,
                 e.container_id.empty() ? "" : " container " + e.container_id.substr(0, 12));
  print_handler_history(r, stdout, "handler    ");
  print_tsc_trust(j);
  print_clock_adjustments(j);
  if (j.contains("sync")) print_sync_summary(j["sync"]);
  if (j.contains("write_error"))  // record stopped early: the disk filled up (or another write error)
    fmt::print("stopped    by a write error: {}\n", j["write_error"].value("what", ""));
  if (r.error()) fmt::print("ERROR      {}\n", r.error()->what());
}

}  // namespace

int run_info(const InfoOptions& a) {
  TraceReader r(a.dir);
  EventTotals t = count_events(r);
  nlohmann::json j = summary_json(a.dir, r, t);
  if (a.json)
    fmt::print("{}\n", j.dump(2));
  else
    print_summary(a.dir, r, t, j);
  return r.error() ? 2 : 0;
}

}  // namespace cptrace
