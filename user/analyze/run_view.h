// The state of `cptrace top RUN`: a run directory holding one trace per node
// (RUN/NODE/, each written as `cptrace record -o RUN/NODE` writes it, e.g. by
// `cptrace cluster record`), followed while the nodes record. The nodes are
// those RUN/cluster.json lists, else the directories holding a recording (never
// RUN/translated, a translated trace).
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
// rates do within +-max_drift_ppm of the nodes' nominal TSC frequency ratio (a
// node's clock-stream slope to the kHz until its meta.json has tsc_hz), and for
// an instant past the last round it is the drift bound, widening by 2 k rho per
// tick away from it. Paths to the reference and every duration's bound are
// translate's and latency's (relation_paths.h, DurationBounds). A bound shown
// live therefore holds for the rounds known then, and once every node's trace
// is complete the last refresh is exactly `translate --clock-model piecewise
// --inputs rounds` + `latency`.
//
// Cost of a refresh: the relations are rebuilt from the rounds (a few hundred
// points per pair). While the skews, the paths and the node pairs related stay
// as they were, a tuple's bound is computed again only when the relations it
// queries changed where it queries them (DriftBoundRelation::same_below: a new
// round at the end of a pair's rounds changes that pair's relation only after
// the last earlier round it does not supersede, usually the previous one or a
// few before), carried along the paths; otherwise every matched tuple's bound is
// computed again. Then the percentiles are selected (nth_element): O(tuples) per
// refresh either way (bench/bench_run_view.cpp measures each case).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/trace_tail.h"
#include "translate/clock_relation.h"  // Bound

namespace cptrace {

class DriftBoundRelation;

struct RunViewOptions {
  std::vector<std::pair<std::string, std::string>> pairs;  // FROM,TO channel names
  std::string reference;  // empty: cluster.json's first node, else the first by name
  double max_drift_ppm = 500;
  bool flows = false;  // --flows: every flow's one-way delays too (run_flows.h)
};

// RUN is a run RunView follows: it has a cluster.json, or a directory holding a
// recording (not RUN/translated, nor a directory whose events.cpt has no frame
// yet). `top` waits for this, so that it never follows a run with no node.
bool holds_run(const std::string& run_dir);

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
  // The nodes RUN/cluster.json says are starting (no byte of their trace yet).
  std::vector<std::string> starting() const;
  // The nodes not complete yet, by name (those of cluster.json without a directory too).
  std::vector<std::string> incomplete() const;
  // The bytes of all nodes' events.cpt seen by the last poll (growth = alive).
  uint64_t file_bytes() const;
  // Why a completed node's file has unread bytes ("" when none).
  std::string damage() const;
  // One refresh as JSON (--json prints it; the screen is drawn from it).
  nlohmann::json snapshot();
  // The tuples the last snapshot bounded (new ones, and those whose relation changed).
  uint64_t last_bounded() const { return last_bounded_; }
  struct Unchanged;

 private:
  struct Node;
  struct Side {
    static constexpr uint16_t kNoCpu = 0xffff;
    uint16_t node = 0;
    uint16_t cpu = kNoCpu;  // the CPU the stamp names (TscOnCpu), else kNoCpu
    uint64_t ts = 0;
  };
  // The bounds of a pair's first `rows` matched tuples, per row, under the
  // relations of refresh `generation`.
  struct Bounds {
    static constexpr uint8_t kUnrelated = 250, kFailed = 251, kNone = 255;
    uint64_t generation = 0;
    size_t rows = 0;
    std::vector<int64_t> est, lo, hi;  // per row
    std::vector<int64_t> sel_est, sel_lo, sel_hi;  // the first sel_rows rows' values, reordered by the selection
    size_t sel_rows = 0;
    std::vector<uint8_t> scenario;  // index into names, or kUnrelated, kFailed
    std::vector<std::string> names;  // the scenarios seen
    std::array<uint64_t, 256> count{};  // rows per scenario index
    uint64_t failed = 0;
    std::string problem;  // of the first failure
    uint8_t scenario_index(const char* name);
    void set(size_t row, uint8_t scenario, const Bound& d);
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
  // One refresh's bounds, in steps: the nodes' clocks, the reference, the
  // relations onto it, then each pair bounded and summed up.
  struct Relations;
  nlohmann::json pairs_json(Relations& r);
  nlohmann::json flows_json(Relations& r);
  void same_named_nodes(std::vector<std::string>& problems) const;
  Relations node_clocks() const;
  bool pick_reference(Relations& r, std::vector<std::string>& problems) const;
  void relate_nodes(Relations& r, std::vector<std::string>& problems) const;
  static std::string structure_of(const Relations& r);
  void bound_pair(size_t k, const Relations& r, bool reuse, const Unchanged& same);
  nlohmann::json pair_summary(size_t k, const Relations& r);

  std::string dir_;
  RunViewOptions opt_;
  // The relations the pairs' bounds were computed with: their structure (skews,
  // paths, pairs related) and every node pair's rounds relation.
  std::string structure_;
  std::map<std::pair<size_t, size_t>, std::shared_ptr<const DriftBoundRelation>> prev_drifts_;
  uint64_t generation_ = 0;
  uint64_t last_bounded_ = 0;
  std::vector<std::string> manifest_;  // RUN/cluster.json's node names, once read
  std::vector<std::pair<std::string, std::string>> manifest_states_;  // and their states, as last read
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Pair> pairs_;
  uint64_t kernel_stamped_ = 0;  // pair events in CLOCK_MONOTONIC: not joined live
  int64_t polled_mono_ns_ = 0;
};

}  // namespace cptrace
