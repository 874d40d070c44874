#include "load/maxrate.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace cptrace {

using nlohmann::json;

bool judge_round(MaxrateRound& r, double tol) {
  const double R = r.rate, floor_rate = (1 - tol) * R;
  const auto& g = r.gen;
  const auto& s = r.sink;
  // The generator was blocked if it spent more than tol of the round waiting for its socket.
  bool blocked = g.blocked_s > tol * std::max(g.elapsed_s, 1e-9);
  if (!g.error.empty())
    r.verdict = "generator error: " + g.error;
  else if (g.send_errors)
    r.verdict = fmt::format("{} tuples refused by the sending kernel", g.send_errors);
  else if (s.lost)
    r.verdict = fmt::format("lost {} (first missing id {})", s.lost, s.first_missing);
  else if (s.duplicates)
    r.verdict = fmt::format("{} duplicates", s.duplicates);
  else if (g.achieved_rate < floor_rate && !blocked)
    r.verdict = fmt::format("generator-limited: it emitted {:.0f}/s without being blocked", g.achieved_rate);
  else if (s.intake_rate < floor_rate)
    r.verdict = fmt::format("backlog grows: intake {:.0f}/s < {:.0f}/s", s.intake_rate, floor_rate);
  else
    r.verdict = "ok";
  r.sustained = r.verdict == "ok";
  return r.sustained;
}

namespace {

void print_header() {
  fmt::print("{:>5} {:>10} {:>9} {:>11} {:>9} {:>9} {:>9} {:>6} {:>5} {:>10} {:>8} {:>7}  {}\n", "round", "rate/s",
             "emitted", "gen rate/s", "late p99", "blocked", "received", "lost", "dup", "intake/s", "lag ms", "drain s",
             "verdict");
}

void print_row(size_t k, const MaxrateRound& r) {
  fmt::print("{:5} {:10.0f} {:9} {:11.0f} {:7.3f}ms {:8.3f}s {:9} {:6} {:5} {:10.0f} {:8.1f} {:7.2f}  {}\n", k, r.rate,
             r.gen.emitted, r.gen.achieved_rate, r.gen.lateness.quantile(0.99) / 1e6, r.gen.blocked_s, r.sink.unique,
             r.sink.lost, r.sink.duplicates, r.sink.intake_rate, r.sink.lag_tuples / r.rate * 1e3, r.sink.drain_s,
             r.verdict);
  fflush(stdout);
}

void check(const MaxrateOptions& o) {
  if (!(o.from > 0)) throw std::runtime_error(fmt::format("--from {}: must be a positive rate", o.from));
  if (!(o.step > 0)) throw std::runtime_error(fmt::format("--step {}: must be a positive rate", o.step));
  if (!(o.duration_s >= 0.5))
    throw std::runtime_error(
        fmt::format("--duration {}: need at least 0.5 s per round for the intake slope", o.duration_s));
  if (o.max && o.max < o.from) throw std::runtime_error(fmt::format("--max {}: below --from {}", o.max, o.from));
  if (!(o.tolerance > 0 && o.tolerance < 0.5))
    throw std::runtime_error(fmt::format("--tolerance {}: must be in (0, 0.5)", o.tolerance));
}

}  // namespace

int run_maxrate(const MaxrateOptions& o) {
  check(o);
  Endpoint ctl_ep =
      o.control.empty() ? Endpoint{o.gen.to.host, uint16_t(o.gen.to.port + 1)} : parse_endpoint(o.control, "--control");
  SinkControl ctl(ctl_ep);
  std::vector<MaxrateRound> rounds;
  if (!o.json) print_header();
  uint64_t next_id = 0;
  double best = 0;
  for (int k = 0; k < 10000; ++k) {
    double rate = o.from + k * o.step;
    if (o.max && rate > o.max * (1 + 1e-12)) break;
    MaxrateRound r;
    r.rate = rate;
    GenOptions g = o.gen;
    g.rate = rate;
    g.duration_s = o.duration_s;
    g.first_id = next_id;
    uint64_t n = slot_count(rate, o.duration_s);
    ctl.begin(next_id, n, rate, o.duration_s);
    r.gen = run_generator(g, nullptr);
    r.sink = ctl.end(r.gen.emitted);
    next_id += n;
    bool ok = judge_round(r, o.tolerance);
    if (!o.json) print_row(rounds.size(), r);
    rounds.push_back(r);
    if (!ok) break;
    best = rate;
  }
  const MaxrateRound& last = rounds.back();
  bool capped = last.sustained;  // every round up to --max passed
  if (o.json) {
    json a = json::array();
    for (auto& r : rounds) {
      json j = {{"rate", r.rate},
                {"gen", r.gen.to_json()},
                {"sink", r.sink.to_json()},
                {"sustained", r.sustained},
                {"verdict", r.verdict}};
      a.push_back(j);
    }
    fmt::print("{}\n", json{{"max_sustainable_rate", best}, {"reached_max", capped}, {"rounds", a}}.dump(2));
  } else if (best == 0) {
    fmt::print("no sustainable rate: the first round ({:.0f}/s) failed: {}\n", o.from, last.verdict);
  } else if (capped) {
    fmt::print("max sustainable throughput: >= {:.0f} tuples/s (every round up to --max {:.0f} was sustained)\n", best,
               o.max);
  } else {
    fmt::print("max sustainable throughput: {:.0f} tuples/s (at {:.0f}/s: {})\n", best, last.rate, last.verdict);
  }
  return 0;
}

}  // namespace cptrace
