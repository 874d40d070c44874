// `cptrace rates`: the non-blocking service rate of the server behind a queue,
// from one node's trace, two ways.
//
// A channel pair A,B is a queue: A is logged when a tuple enters it (enqueue, or
// "in" of a stage), B when the server takes it out / finishes it (dequeue, or
// "out"). Items are paired by tuple id.
//
// What "blocked" means from a trace. The queue's occupancy at instant t is the
// number of tuples whose A stamp is <= t and whose B stamp is > t (a B without
// an A counts as enqueued before the trace started; an A without a B as still
// queued at the end). The server is *starved* (blocked on its input) while the
// occupancy is 0: it has nothing to do. A window of length T is *non-blocking*
// when the occupancy stays >= 1 during all of it (an enqueue and a dequeue at
// the same tick leave no empty instant). Output-side blocking (the server's own
// downstream queue full) is not visible from one pair and is not excluded.
//
// 1. Beard & Chamberlain's heuristic ("Run time approximation of non-blocking
//    service rates for streaming systems"): windows of length T aligned to the
//    trace start; each non-blocking window gives a sample (B events in it) / T;
//    the samples, in time order, are smoothed with a Gaussian filter (sigma in
//    windows, radius 3 sigma, weights renormalised at the ends); the estimate is
//    their q-quantile (nearest rank, default 0.95). Convergence check: the
//    estimate over each prefix holding 50%, 60%, ..., 100% of the samples must
//    stay within `tolerance` (relative) of the final one. Fewer than
//    `min_windows` non-blocking windows, or a drift above the tolerance, gives a
//    status instead of a number.
// 2. The exact per-item estimate the trace allows, for a single FIFO server:
//    service time s_i = d_i - max(a_i, d_{i-1}) in departure order (the server
//    starts item i when it arrives or when the previous one leaves, whichever is
//    later); rate = 1 / mean(s). `overtakes` counts departures whose arrival is
//    earlier than the previous departure's arrival (not FIFO: several servers).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/channel_pair.h"
#include "tables/output_form.h"
#include "trace/trace_timeline.h"

namespace cptrace {

struct RateOptions {
  double period_ms = 10;  // T
  uint64_t min_windows = 30;
  double quantile = 0.95;
  double tolerance = 0.05;
  double sigma = 1.0;  // Gaussian filter width, in windows
};

struct ServiceRate {
  std::string from, to;
  double period_s = 0;
  // Beard & Chamberlain
  uint64_t windows = 0, nonblocking = 0;
  std::string status;  // "ok", "not converged", "too few non-blocking windows",
                       // "no tuple id on both channels"
  std::optional<double> estimate;  // items/s, only when status == "ok"
  double drift = 0;  // largest relative prefix deviation seen
  double raw_max = 0;  // largest unfiltered sample (items/s)
  // exact per item
  uint64_t items = 0, overtakes = 0;
  double service_mean_s = 0, service_p50_s = 0, service_p95_s = 0;
  std::optional<double> exact_rate;  // 1 / mean service time
  uint64_t unmatched_from = 0, unmatched_to = 0, duplicates = 0;
};

// Items with both stamps: arrival (A) and departure (B) TSC; a departure without
// an arrival has arrival == nullopt.
struct QueueItem {
  std::optional<uint64_t> arrive;
  std::optional<uint64_t> depart;
};

// Memory: one entry per tuple id seen on either channel.
ServiceRate service_rate(const TraceReader& r, const Timeline& tl, uint64_t from, uint64_t to, const RateOptions& opt);
// The computation on items already paired (what service_rate() does after reading).
ServiceRate service_rate_of(std::vector<QueueItem> items, const Timeline& tl, uint64_t period, const RateOptions& opt);
// Gaussian smoothing of a sequence (exposed for tests).
std::vector<double> gaussian_filter(const std::vector<double>& x, double sigma);
nlohmann::json service_rate_json(const ServiceRate& s);

// `cptrace rates DIR --pair FROM,TO...`: one estimate per pair, as text, CSV or JSON.
struct RatesOptions {
  std::string dir;
  std::vector<ChannelPair> pairs;  // the queues: enqueue (or in), dequeue (or out)
  RateOptions estimator;
  Output output = Output::Text;
};
int run_rates(const RatesOptions& o);

}  // namespace cptrace
