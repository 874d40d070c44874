// The live view of a run directory: per-node counts, cross-node percentiles with bounds.
#include "analyze/run_view.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "analyze/live_view.h"  // channel_arg_id
#include "trace/clock_map.h"
#include "trace/trace_file.h"
#include "trace/trace_format.h"
#include "trace/trace_reader.h"  // tsc_skew_err_of
#include "translate/drift_bound.h"
#include "translate/latency.h"
#include "translate/rank_select.h"
#include "translate/relation_cursor.h"
#include "translate/relation_paths.h"
#include "translate/sync_pairs.h"

namespace cptrace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunView::Node {
  std::string dir, name;
  std::unique_ptr<TraceTail> tail;
  json meta = json::object();
  bool complete = false;  // meta.json said so before the last poll read the frames
  uint64_t events = 0;  // user and close events, as `info` counts them
  uint64_t newest_tsc = 0;  // the newest TSC-stamped event read
  // events/s: events and newest stamp at the previous poll.
  uint64_t prev_events = 0, prev_newest = 0;
  double per_s = 0;
};

namespace {

int64_t mono_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// meta.json is replaced by rename, so a read sees one version or the other.
// Missing or unreadable: the last one read stays.
void read_meta(const std::string& dir, json& meta) {
  try {
    json j = json::parse(read_trace_file((fs::path(dir) / "meta.json").string()));
    if (j.is_object()) meta = std::move(j);
  } catch (const std::exception&) {
  }
}

// translate's mid_span (translate.cpp): the middle of the node's clock stream, or
// an instant of the pair's first round when the stream has fewer than two points.
int64_t mid_span(const std::vector<ClockPoint>& pts, const PairRounds& rounds) {
  if (pts.size() >= 2 && pts.back().tsc > pts.front().tsc) {
    int64_t lo = int64_t(pts.front().tsc), hi = int64_t(pts.back().tsc);
    return lo + (hi - lo) / 2;
  }
  if (rounds.rounds.empty()) return 0;
  const PairRound& r = rounds.rounds.front();
  return r.x_initiated ? r.t1 : r.t2;
}

// One percentile of a column: the nearest-rank element (latency_summary.h).
int64_t select(std::vector<int64_t>& v, double p) {
  auto k = v.begin() + int64_t(nearest_rank_index(v.size(), p));
  std::nth_element(v.begin(), k, v.end());
  return *k;
}

// The newest round this node initiated, on its own clock (its receive stamp t4):
// bounds of later events are extrapolated past it.
uint64_t last_round(const std::vector<SyncRound>& rounds) {
  uint64_t t = 0;
  for (const SyncRound& r : rounds)
    if (r.kernel_ok) t = std::max(t, r.t4);
  return t;
}

}  // namespace

RunView::RunView(std::string run_dir, RunViewOptions o) : dir_(std::move(run_dir)), opt_(std::move(o)) {
  if (!(opt_.max_drift_ppm > 0) || opt_.max_drift_ppm > 100000)
    throw std::runtime_error(fmt::format("--max-drift-ppm {}: must be in (0, 100000]", opt_.max_drift_ppm));
  for (const auto& [from, to] : opt_.pairs) {
    Pair p;
    p.from = channel_arg_id(from), p.to = channel_arg_id(to);
    pairs_.push_back(std::move(p));
  }
}

RunView::~RunView() = default;

namespace {

// The node names of RUN/cluster.json (`cluster record`'s manifest), in its
// order; empty when there is none (a run of hand-started recorders).
std::vector<std::string> manifest_nodes(const std::string& run) {
  std::vector<std::string> names;
  try {
    json m = json::parse(read_trace_file((fs::path(run) / "cluster.json").string()));
    for (const json& n : m.at("nodes")) names.push_back(n.at("name").get<std::string>());
  } catch (const std::exception&) {
    names.clear();  // absent, or being replaced: the directories say
  }
  return names;
}

// Without a manifest: a recording's directory, not a translated trace's (RUN/
// translated) nor anything else. Its meta.json is a recorder's (a translated
// one has "translated"); before there is one, its first frame is the clock
// stream, which a recorder writes first and nothing else does. Undecided (no
// meta.json, no frame yet): not yet.
bool is_recording(const fs::path& d) {
  json meta;
  read_meta(d.string(), meta);
  if (meta.is_object()) return !meta.contains("translated");
  std::ifstream in(d / "events.cpt", std::ios::binary);
  char head[kFileHeaderSize];
  FrameHeader h;
  if (!in.read(head, sizeof head) || !in.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
  return h.magic == kFrameMagic && (h.type == uint16_t(FrameType::Clock) || h.type == uint16_t(FrameType::Clock2));
}

}  // namespace

// The nodes: those RUN/cluster.json names, once their directory exists; without
// it, the recordings among RUN's directories (is_recording). Nodes keep the index
// they got (the order they appeared in, by name or manifest order within one scan).
void RunView::find_nodes() {
  std::vector<std::string> found;
  std::error_code ec;
  std::vector<std::string> listed = manifest_nodes(dir_);
  if (!listed.empty()) {
    manifest_ = listed;
    for (const std::string& name : listed)
      if (fs::is_directory(fs::path(dir_) / name, ec)) found.push_back((fs::path(dir_) / name).string());
  } else if (manifest_.empty()) {
    for (const auto& d : fs::directory_iterator(dir_, ec))
      if (d.is_directory(ec) && fs::exists(d.path() / "events.cpt", ec) && is_recording(d.path()))
        found.push_back(d.path().string());
    std::sort(found.begin(), found.end());
  }
  for (const std::string& d : found) {
    if (std::any_of(nodes_.begin(), nodes_.end(), [&](const auto& n) { return n->dir == d; })) continue;
    if (nodes_.size() >= 0xffff) throw std::runtime_error(dir_ + ": more than 65535 node directories");
    auto n = std::make_unique<Node>();
    n->dir = d;
    n->name = fs::path(d).filename().string();
    n->tail = std::make_unique<TraceTail>((fs::path(d) / "events.cpt").string());
    nodes_.push_back(std::move(n));
  }
}

void RunView::add_events(uint16_t node, const std::vector<TraceEvent>& evs) {
  Node& n = *nodes_[node];
  for (const TraceEvent& e : evs) {
    if (e.kind != uint8_t(EventKind::Count)) n.events++;
    bool tsc = e.timebase != uint8_t(Timebase::MonoNs);
    if (tsc) n.newest_tsc = std::max(n.newest_tsc, e.ts);
    if (e.kind != uint8_t(EventKind::User)) continue;
    for (Pair& p : pairs_) {
      bool is_from = e.channel == p.from, is_to = e.channel == p.to;
      if (!is_from && !is_to) continue;
      if (!tsc) {  // needs the correlation stream's interval: left to translate
        kernel_stamped_++;
        continue;
      }
      // As latency's join: the first event of a tuple on each side counts.
      Side s{node, e.ts};
      auto& mine = is_from ? p.from_seen : p.to_seen;
      auto& other = is_from ? p.to_seen : p.from_seen;
      if (!mine.emplace(e.tuple, s).second) {
        (is_from ? p.from_duplicates : p.to_duplicates)++;
        continue;
      }
      auto it = other.find(e.tuple);
      if (it != other.end()) p.rows.push_back(is_from ? std::pair{s, it->second} : std::pair{it->second, s});
    }
  }
}

void RunView::poll() {
  find_nodes();
  polled_mono_ns_ = mono_now_ns();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = *nodes_[i];
    read_meta(n.dir, n.meta);  // before the frames: complete means every frame is already written
    n.complete = n.meta.value("complete", false);
    std::string name = n.meta.value("node", "");
    if (!name.empty()) n.name = name;  // rounds name their peers by it
    n.prev_events = n.events, n.prev_newest = n.newest_tsc;
    n.tail->poll([&](const std::vector<TraceEvent>& evs) { add_events(uint16_t(i), evs); });
    double hz = ClockMap(n.tail->clock()).tsc_hz();
    if (n.prev_newest && n.newest_tsc > n.prev_newest && hz > 0)
      n.per_s = double(n.events - n.prev_events) / (double(n.newest_tsc - n.prev_newest) / hz);
  }
}

bool RunView::complete() const {
  if (nodes_.empty() || nodes_.size() < manifest_.size()) return false;
  for (const auto& n : nodes_)
    if (!n->complete || n->tail->offset() < n->tail->file_bytes()) return false;
  return true;
}

uint64_t RunView::file_bytes() const {
  uint64_t b = 0;
  for (const auto& n : nodes_) b += n->tail->file_bytes();
  return b;
}

std::string RunView::damage() const {
  for (const auto& n : nodes_)
    if (n->complete && n->tail->offset() < n->tail->file_bytes())
      return fmt::format("{} at byte {}: {}", n->tail->path(), n->tail->offset(), n->tail->pending_reason());
  return "";
}

json RunView::pairs_json(std::vector<std::string>& problems) {
  size_t n = nodes_.size();
  std::vector<std::string> names;
  std::vector<uint64_t> skew(n);
  std::vector<std::vector<ClockPoint>> points(n);
  for (size_t i = 0; i < n; ++i) {
    names.push_back(nodes_[i]->name);
    skew[i] = tsc_skew_err_of(nodes_[i]->meta);
    points[i] = ClockMap(nodes_[i]->tail->clock()).points();
  }
  size_t ref = 0;
  if (!opt_.reference.empty()) {
    auto it = std::find(names.begin(), names.end(), opt_.reference);
    if (it == names.end()) {
      problems.push_back("--reference " + opt_.reference + ": no such node in the run (yet)");
      return json::array();
    }
    ref = size_t(it - names.begin());
  } else if (!manifest_.empty()) {  // the cluster's reference, as its translate
    auto it = std::find(names.begin(), names.end(), manifest_.front());
    if (it == names.end()) {
      problems.push_back("the reference " + manifest_.front() + " (cluster.json's first node) is not in the run yet");
      return json::array();
    }
    ref = size_t(it - names.begin());
  } else {
    ref = size_t(std::min_element(names.begin(), names.end()) - names.begin());
  }

  // Every node pair's relation from the rounds read so far, as `translate
  // --clock-model piecewise --inputs rounds` builds it (translate.cpp build_pair).
  const int64_t ppb = std::llround(opt_.max_drift_ppm * 1000);
  DurationBounds db;
  db.names = names;
  db.ref = ref;
  std::map<std::pair<size_t, size_t>, RelationEdge> edges;
  for (size_t x = 0; x < n; ++x)
    for (size_t y = 0; y < n; ++y) {
      if (x == y) continue;
      PairRounds pr = pair_rounds(rounds_with_peer(nodes_[x]->tail->sync_rounds(), names[y], skew[x], skew[y]),
                                  rounds_with_peer(nodes_[y]->tail->sync_rounds(), names[x], skew[y], skew[x]));
      if (pr.rounds.empty()) continue;
      auto drift = std::make_shared<DriftBoundRelation>(round_constraints(pr.rounds), ppb);
      if (!drift->bounded()) continue;
      db.direct[{x, y}] = drift;
      try {
        edges[{x, y}] = {drift, (long double)drift->at(mid_span(points[x], pr)).width()};
      } catch (const std::exception&) {
        // far outside the pair's span: not a usable edge (as translate)
      }
    }
  RelationPaths paths = relation_paths(n, ref, edges);
  db.to_ref = paths.to_ref;
  db.max_err.assign(skew.begin(), skew.end());
  for (size_t i = 0; i < n; ++i)
    if (!db.to_ref[i])
      problems.push_back(names[i] + ": no MinRTT rounds relate it to the reference " + names[ref] + " yet");

  // Durations in ns over the reference stream's frequency interval (strict,
  // against CLOCK_MONOTONIC_RAW where the stream has it).
  std::optional<TscFrequency> f;
  if (points[ref].size() >= 2) f = ClockMap(nodes_[ref]->tail->clock()).tsc_frequency(0, points[ref].size() - 1);

  // The relations are a function of the rounds, the skews and the paths: while
  // those stay as they were, the bounds computed before are exactly what a
  // recomputation would give, and only the tuples matched since are bounded.
  std::string key = fmt::format("ref {} ppb {}", ref, ppb);
  for (size_t i = 0; i < n; ++i) {
    key += fmt::format("|{} {} {}:", names[i], nodes_[i]->tail->sync_rounds().size(), skew[i]);
    for (size_t hop : paths.path[i]) key += fmt::format(" {}", hop);
  }

  json out = json::array();
  for (size_t k = 0; k < pairs_.size(); ++k) {
    Pair& p = pairs_[k];
    Bounds& c = p.bounds;
    if (c.key != key) c = Bounds{key};
    std::vector<RelationCursor> cursors;
    static const IdentityRelation none;  // nodes without a path: their rows are skipped first
    for (size_t i = 0; i < n; ++i) cursors.emplace_back(db.to_ref[i] ? *db.to_ref[i] : none);
    for (; c.rows < p.rows.size(); ++c.rows) {
      const auto& [a, b] = p.rows[c.rows];
      if (!db.to_ref[a.node] || !db.to_ref[b.node]) {
        c.unrelated++;
        continue;
      }
      try {
        Bound ia = cursors[a.node].at_stamp(a.ts, skew[a.node]), ib = cursors[b.node].at_stamp(b.ts, skew[b.node]);
        const char* scenario = "";
        Bound d = db.duration({a.ts, ia.est, ia.lo, ia.hi, a.node}, {b.ts, ib.est, ib.lo, ib.hi, b.node}, scenario);
        c.est.push_back(d.est), c.lo.push_back(d.lo), c.hi.push_back(d.hi);
        c.scenarios[scenario]++;
      } catch (const std::exception& e) {
        if (c.failed++ == 0)
          c.problem = fmt::format("{} -> {}: {}", opt_.pairs[k].first, opt_.pairs[k].second, e.what());
      }
    }
    if (!c.problem.empty()) problems.push_back(c.problem);
    std::vector<int64_t>&est = c.est, &lo = c.lo, &hi = c.hi;  // reordered by the selection: any order will do
    const std::map<std::string, uint64_t>& scenarios = c.scenarios;
    const uint64_t unrelated = c.unrelated, failed = c.failed;
    json j = {{"from", opt_.pairs[k].first},
              {"to", opt_.pairs[k].second},
              {"reference", names[ref]},
              {"count", est.size()},
              {"matched", p.rows.size()},
              {"unrelated", unrelated},
              {"failed", failed},
              {"from_only", p.from_seen.size() - p.rows.size()},
              {"to_only", p.to_seen.size() - p.rows.size()},
              {"from_duplicates", p.from_duplicates},
              {"to_duplicates", p.to_duplicates},
              {"scenarios", scenarios},
              {"unit", "ticks"}};
    if (!est.empty()) {
      for (auto [key, q] : {std::pair{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"max", 1.0}}) {
        // The k-th smallest true duration lies between the k-th smallest lo and hi.
        int64_t e = select(est, q), l = select(lo, q), h = select(hi, q);
        json v = {{"ticks", e}, {"ticks_lo", l}, {"ticks_hi", h}};
        if (f) {
          NsBound ns = ticks_to_ns(e, l, h, f->hz, f->lo, f->hi);
          v["ns"] = ns.ns, v["ns_lo"] = ns.lo, v["ns_hi"] = ns.hi;
        }
        j[key] = v;
      }
    }
    out.push_back(std::move(j));
  }
  return out;
}

json RunView::snapshot() {
  json j = {{"run", dir_}, {"polled_mono_ns", polled_mono_ns_}, {"complete", complete()}};
  j["nodes"] = json::array();
  for (const auto& np : nodes_) {
    const Node& n = *np;
    const Counters& c = n.tail->counters();
    ClockMap map(n.tail->clock());
    json nj = {{"node", n.name},
               {"dir", fs::path(n.dir).filename().string()},
               {"events", n.events},
               {"records", n.tail->records()},
               {"per_s", n.per_s},
               {"seen", c.total_seen()},
               {"dropped", c.total_dropped()},
               {"rounds", n.tail->sync_rounds().size()},
               {"bytes_read", n.tail->offset()},
               {"complete", n.complete},
               {"newest_tsc", n.newest_tsc},
               {"last_round_tsc", last_round(n.tail->sync_rounds())}};
    // The newest event's instant on CLOCK_MONOTONIC (the node's own stream):
    // polled_mono_ns minus this is how far the view is behind that node's data.
    if (map.points().size() >= 2 && n.newest_tsc) nj["newest_mono_ns"] = map.tsc_to_mono(n.newest_tsc);
    j["nodes"].push_back(std::move(nj));
  }
  std::vector<std::string> problems;
  j["pairs"] = pairs_json(problems);
  if (kernel_stamped_)
    problems.push_back(fmt::format("{} kernel-stamped pair events not joined live", kernel_stamped_));
  j["problems"] = problems;
  return j;
}

}  // namespace cptrace
