// The state of `cptrace top RUN`: a run directory holding one trace per node
// (RUN/NODE/, each written as `cptrace record -o RUN/NODE` writes it, e.g. by
// `cptrace cluster record`), followed while the nodes record.
//
// Per node: events and drops, read from its frames as they complete (TraceTail).
// Per channel pair FROM,TO (on any nodes, joined by tuple id as `latency` joins
// them): the percentiles of the durations on the reference node's TSC, each with
// a strict bound, for the tuples whose two events have been read.
//
// Clock relation: re-built at every refresh from the MinRTT rounds read so far,
// with translate's own code: each node pair's rounds (sync_pairs.h, widened by the
// TSC skew across CPUs) bound the clocks under the rate-bounded model
// (drift_bound.h, `translate --clock-model piecewise`): it holds whatever the
// rates do within +-max_drift_ppm, and for an instant past the last round it is
// the drift bound, widening by 2 rho per tick away from it. Paths to the reference
// and every duration's bound are translate's and latency's (relation_paths.h,
// DurationBounds). A bound shown live therefore holds for the rounds known then,
// and once every node's trace is complete the last refresh is exactly
// `translate --clock-model piecewise --inputs rounds` + `latency`.
//
// Cost of a refresh: the relations are rebuilt from the rounds (a few hundred
// points per pair). When they are the same as at the previous refresh (no new
// round, same skews and paths) only the tuples matched since are bounded;
// otherwise every matched tuple's bound is computed again (the relation changed,
// so every bound may have). Then the percentiles are selected (nth_element):
// O(tuples) per refresh either way (bench/bench_run_view.cpp measures both).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/trace_tail.h"

namespace cptrace {

struct RunViewOptions {
  std::vector<std::pair<std::string, std::string>> pairs;  // FROM,TO channel names
  std::string reference;  // empty: cluster.json's first node, else the first by name
  double max_drift_ppm = 500;
};

class RunView {
 public:
  RunView(std::string run_dir, RunViewOptions o);
  ~RunView();
  // Picks up node directories that appeared (those RUN/cluster.json names, else
  // the recordings: not RUN/translated nor any other directory), re-reads
  // each node's meta.json, then reads the frames completed since the last poll.
  void poll();
  size_t nodes() const { return nodes_.size(); }
  // Every node's meta.json says complete and all its frames are read.
  bool complete() const;
  // The bytes of all nodes' events.cpt seen by the last poll (growth = alive).
  uint64_t file_bytes() const;
  // Why a completed node's file has unread bytes ("" when none).
  std::string damage() const;
  // One refresh as JSON (--json prints it; the screen is drawn from it).
  nlohmann::json snapshot();

 private:
  struct Node;
  struct Side {
    uint16_t node = 0;
    uint64_t ts = 0;
  };
  // The bounds of a pair's first `rows` matched tuples under the relations that
  // `key` names (rounds per node, skews, paths).
  struct Bounds {
    std::string key;
    size_t rows = 0;
    std::vector<int64_t> est, lo, hi;
    std::map<std::string, uint64_t> scenarios;
    uint64_t unrelated = 0, failed = 0;
    std::string problem;  // of the first failure
  };
  struct Pair {
    uint64_t from = 0, to = 0;  // channel ids
    std::unordered_map<uint64_t, Side> from_seen, to_seen;  // first event of each tuple
    std::vector<std::pair<Side, Side>> rows;  // matched tuples, in match order
    uint64_t from_duplicates = 0, to_duplicates = 0;
    Bounds bounds;
  };
  void add_events(uint16_t node, const std::vector<TraceEvent>& evs);
  void find_nodes();
  nlohmann::json pairs_json(std::vector<std::string>& problems);

  std::string dir_;
  RunViewOptions opt_;
  std::vector<std::string> manifest_;  // RUN/cluster.json's node names, once read
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Pair> pairs_;
  uint64_t kernel_stamped_ = 0;  // pair events in CLOCK_MONOTONIC: not joined live
  int64_t polled_mono_ns_ = 0;
};

}  // namespace cptrace
