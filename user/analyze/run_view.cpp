// The live view of a run directory: per-node counts, cross-node percentiles with bounds.
#include "analyze/run_view.h"

#include "analyze/run_flows.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analyze/live_view.h"  // channel_arg_id
#include "clock/clock_map.h"
#include "trace/trace_file.h"
#include "trace/trace_format.h"
#include "trace/trace_reader.h"
#include "trace/tsc_skew_history.h"
#include "translate/drift_bound.h"
#include "latency/latency.h"
#include "translate/relation_cursor.h"
#include "translate/relation_paths.h"
#include "translate/sync_pairs.h"
#include "clock/clock_now.h"

namespace cptrace {

namespace fs = std::filesystem;
using nlohmann::json;

struct RunView::Node {
  std::string dir, name;
  std::unique_ptr<TraceTail> tail;
  json meta = json::object();
  TraceMeta info;  // meta's common facts, typed
  bool complete = false;  // meta.json said so before the last poll read the frames
  uint64_t events = 0;  // user and close events, as `info` counts them
  uint64_t newest_tsc = 0;  // the newest TSC-stamped event read
  // events/s: events and newest stamp at the previous poll.
  uint64_t prev_events = 0, prev_newest = 0;
  double per_s = 0;
};

namespace {

// The newest round this node initiated, on its own clock (its receive stamp t4):
// bounds of later events are extrapolated past it.
uint64_t last_round(const std::vector<SyncRound>& rounds) {
  uint64_t t = 0;
  for (const SyncRound& r : rounds)
    if (r.kernel_ok) t = std::max(t, r.t4);
  return t;
}

using DriftMap = std::map<std::pair<size_t, size_t>, std::shared_ptr<const DriftBoundRelation>>;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();

// Instants [first, second) of a clock; second == kMax: no upper end.
using Span = std::pair<int64_t, int64_t>;
bool in_span(const Span& s, int64_t x) { return x >= s.first && (s.second == kMax || x < s.second); }

// The smallest y in [lo, hi) with pred(y), else hi; pred is false, then true.
template <class Pred>
int64_t first_true(int64_t lo, int64_t hi, Pred pred) {
  while (lo < hi) {
    int64_t mid = int64_t(lo + (__int128(hi) - lo) / 2);
    if (pred(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// The instants y of an edge's from-clock at which edge-then-rest answers as
// before: y < c (the edge itself, same_below) and edge.at(y) inside `rest` (the
// span where the rest of the path answers as before; ComposedRelation queries it
// at the edge's lo, est and hi, and its scale at est). A drift-bounded relation's
// lo and hi never decrease with y (each is the extreme over all kept points of
// functions increasing in y), so that is one span, found by bisection. The
// instants searched are those a stamp can query: within +-2 kTranslateTscRange.
Span through(const DriftBoundRelation& edge, int64_t c, const Span& rest) {
  if (rest == Span{kMin, kMax}) return {kMin, c};
  const int64_t lo = -2 * int64_t(kTranslateTscRange), hi = std::min(c, 2 * int64_t(kTranslateTscRange));
  if (hi <= lo) return {0, 0};
  try {
    int64_t a = rest.first == kMin ? lo : first_true(lo, hi, [&](int64_t y) { return edge.at(y).lo >= rest.first; });
    int64_t b = rest.second == kMax ? hi : first_true(lo, hi, [&](int64_t y) { return edge.at(y).hi >= rest.second; });
    return {a, b};
  } catch (const std::exception&) {
    return {0, 0};  // a relation that fails somewhere in range: nothing is known
  }
}

}  // namespace

// Where the relations answer as they did at the previous refresh, from the
// node pairs' relations then and now along the (unchanged) paths.
struct RunView::Unchanged {
  std::vector<Span> node;  // per node: instants of its clock where its relation to the reference is unchanged
  std::map<std::pair<size_t, size_t>, int64_t> direct;  // per related pair: below this
  bool nothing_changed = true;  // every relation as before: every row is covered

  // Every instant a row's bound queries (DurationBounds::duration through
  // RelationCursor::at_stamp, whose results are Relation::at's) lies there.
  bool covers(const Side& a, const Side& b, const std::vector<uint64_t>& skew, const DurationBounds& db) const {
    auto stamp = [&](const Side& s) {
      const uint64_t e = skew[s.node];
      const Span& sp = node[s.node];
      return in_span(sp, int64_t(s.ts)) && (!e || (in_span(sp, int64_t(s.ts - std::min(s.ts, e))) &&
                                                   in_span(sp, int64_t(s.ts + std::min(e, kTranslateTscRange)))));
    };
    if (!stamp(a) || !stamp(b)) return false;
    if (a.node == b.node || a.node == db.ref || b.node == db.ref) return true;
    auto it = direct.find({a.node, b.node});  // remote-remote-direct: at(a) of the pair's own relation
    return it == direct.end() || int64_t(a.ts) < it->second;
  }
};

namespace {

RunView::Unchanged unchanged_spans(const DriftMap& now, const DriftMap& before,
                                   const std::vector<std::vector<size_t>>& path, size_t ref) {
  RunView::Unchanged u;
  for (const auto& [xy, rel] : now) {
    auto it = before.find(xy);
    u.direct[xy] = it == before.end() ? kMin : rel->same_below(*it->second);
    u.nothing_changed = u.nothing_changed && u.direct[xy] == kMax;
  }
  const size_t n = path.size();
  u.node.assign(n, Span{0, 0});  // empty: nothing known (and no path: never queried)
  std::vector<bool> done(n, false);
  std::function<Span(size_t)> span = [&](size_t v) -> Span {
    if (v == ref) return {kMin, kMax};  // the identity
    if (done[v] || path[v].size() < 2) return u.node[v];
    done[v] = true;
    size_t next = path[v][1];  // the path is a tree towards the reference
    u.node[v] = through(*now.at({v, next}), u.direct.at({v, next}), span(next));
    return u.node[v];
  };
  for (size_t v = 0; v < n; ++v) u.node[v] = span(v);
  return u;
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

// The nodes of RUN/cluster.json (`cluster record`'s manifest) and their
// states, in its order; empty when there is none (a run of hand-started
// recorders).
std::vector<std::pair<std::string, std::string>> manifest_nodes(const std::string& run) {
  std::vector<std::pair<std::string, std::string>> nodes;
  try {
    json m = json::parse(read_trace_file((fs::path(run) / "cluster.json").string()));
    for (const json& n : m.at("nodes"))
      nodes.emplace_back(n.at("name").get<std::string>(), n.value("state", std::string()));
  } catch (const std::exception&) {
    nodes.clear();  // absent, or being replaced: the directories say
  }
  return nodes;
}

// Without a manifest: a recording's directory, not a translated trace's (RUN/
// translated) nor anything else. Its meta.json is a recorder's (a translated
// one has "translated"); before there is one, its first frame is the clock
// stream, which a recorder writes first and nothing else does. Undecided (no
// meta.json, no frame yet): not yet.
bool is_recording(const fs::path& d) {
  json meta;
  try {
    meta = json::parse(read_trace_file((d / "meta.json").string()));
  } catch (const std::exception&) {  // missing or being replaced: the frames decide
  }
  if (meta.is_object()) return !meta.contains("translated");
  std::ifstream in(d / "events.cpt", std::ios::binary);
  char head[kFileHeaderSize];
  FrameHeader h;
  if (!in.read(head, sizeof head) || !in.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
  return h.magic == kFrameMagic && (h.type == uint16_t(FrameType::Clock) || h.type == uint16_t(FrameType::Clock2));
}

}  // namespace

bool holds_run(const std::string& run_dir) {
  std::error_code ec;
  if (fs::exists(fs::path(run_dir) / "cluster.json", ec)) return true;
  for (const auto& d : fs::directory_iterator(run_dir, ec))
    if (d.is_directory(ec) && fs::exists(d.path() / "events.cpt", ec) && is_recording(d.path())) return true;
  return false;
}

// The nodes: those RUN/cluster.json names, once their directory exists; without
// it, the recordings among RUN's directories (is_recording). Nodes keep the index
// they got (the order they appeared in, by name or manifest order within one scan).
void RunView::find_nodes() {
  std::vector<std::string> found;
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> states = manifest_nodes(dir_);
  std::vector<std::string> listed;
  for (const auto& [name, state] : states) listed.push_back(name);
  if (!listed.empty()) {
    manifest_ = listed;
    manifest_states_ = states;
    // The controller makes RUN/NODE, then events.cpt in it: a node is followed
    // once its file exists (opening it before would fail the whole view).
    for (const std::string& name : listed)
      if (fs::is_regular_file(fs::path(dir_) / name / "events.cpt", ec))
        found.push_back((fs::path(dir_) / name).string());
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
      Side s{node, e.timebase == uint8_t(Timebase::TscOnCpu) ? e.cpu : Side::kNoCpu, e.ts};
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
  polled_mono_ns_ = mono_ns();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = *nodes_[i];
    reread_trace_meta(n.dir, n.meta, n.info);  // before the frames: complete means every frame is already written
    n.complete = n.info.complete;
    if (!n.info.node.empty()) n.name = n.info.node;  // rounds name their peers by it
    n.prev_events = n.events, n.prev_newest = n.newest_tsc;
    n.tail->poll([&](const std::vector<TraceEvent>& evs) { add_events(uint16_t(i), evs); });
    double hz = ClockMap(n.tail->clock()).tsc_hz();
    if (n.prev_newest && n.newest_tsc > n.prev_newest && hz > 0)
      n.per_s = double(n.events - n.prev_events) / (double(n.newest_tsc - n.prev_newest) / hz);
  }
}

std::vector<std::string> RunView::starting() const {
  std::vector<std::string> names;
  for (const auto& [name, state] : manifest_states_)
    if (state == "starting") names.push_back(name);
  return names;
}

std::vector<std::string> RunView::incomplete() const {
  std::vector<std::string> names;
  for (const auto& n : nodes_)
    if (!n->complete || n->tail->offset() < n->tail->file_bytes()) names.push_back(n->name);
  for (const std::string& m : manifest_)  // listed, no events.cpt yet
    if (std::none_of(nodes_.begin(), nodes_.end(), [&](const auto& n) { return fs::path(n->dir).filename() == m; }))
      names.push_back(m);
  return names;
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

uint8_t RunView::Bounds::scenario_index(const char* name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return uint8_t(i);
  if (names.size() >= kUnrelated) throw std::runtime_error("too many duration scenarios");
  names.push_back(name);
  return uint8_t(names.size() - 1);
}

void RunView::Bounds::set(size_t row, uint8_t s, const Bound& d) {
  if (row >= scenario.size()) {
    est.resize(row + 1), lo.resize(row + 1), hi.resize(row + 1);
    scenario.resize(row + 1, kNone);
  }
  if (scenario[row] != kNone) count[scenario[row]]--;
  if (scenario[row] == kFailed) failed--;
  scenario[row] = s;
  est[row] = d.est, lo[row] = d.lo, hi[row] = d.hi;
  count[s]++;
  if (s == kFailed) failed++;
}

// Every node's clock as the last poll left it, and the relations of every
// node onto the reference built from them: what one refresh bounds with.
struct RunView::Relations {
  size_t n = 0;
  std::vector<std::string> names;
  std::vector<uint64_t> skew;  // per node: a stamp of an unknown CPU's
  std::vector<TscSkewHistory> skews;  // per node and CPU (TscSkewHistory::err_on)
  std::vector<std::vector<ClockPoint>> points;
  std::vector<double> hz;  // nominal TSC frequencies (drift_bound.h), 0: not known yet
  size_t ref = 0;
  int64_t ppb = 0;
  DurationBounds db;
  std::map<std::pair<size_t, size_t>, std::shared_ptr<const DriftBoundRelation>> drifts;
  RelationPaths paths;
  std::optional<TscFrequency> f;  // the reference stream's frequency interval, when it has one
  std::vector<std::string> problems;  // what the refresh could not do, said on the screen
};

RunView::Relations RunView::node_clocks() const {
  Relations r;
  r.n = nodes_.size();
  r.skew.resize(r.n), r.points.resize(r.n), r.hz.resize(r.n);
  for (size_t i = 0; i < r.n; ++i) {
    r.names.push_back(nodes_[i]->name);
    r.skews.push_back(TscSkewHistory::from_meta(nodes_[i]->meta));
    r.skew[i] = r.skews[i].err;
    ClockMap map(nodes_[i]->tail->clock());
    r.points[i] = map.points();
    r.hz[i] = nominal_tsc_hz(nodes_[i]->meta, map);
  }
  return r;
}

// --reference, else the cluster's reference (as its translate), else the first
// name; false, with the problem said, when that node is not in the run yet.
bool RunView::pick_reference(Relations& r, std::vector<std::string>& problems) const {
  const auto& names = r.names;
  // RUN can hold a recorder's directory before its first frame says it is one
  // (and before cluster.json names it): nothing to relate yet.
  if (names.empty()) {
    problems.push_back("no node in the run yet");
    return false;
  }
  if (!opt_.reference.empty()) {
    auto it = std::find(names.begin(), names.end(), opt_.reference);
    if (it == names.end()) {
      problems.push_back("--reference " + opt_.reference + ": no such node in the run (yet)");
      return false;
    }
    r.ref = size_t(it - names.begin());
  } else if (!manifest_.empty()) {  // the cluster's reference, as its translate
    auto it = std::find(names.begin(), names.end(), manifest_.front());
    if (it == names.end()) {
      problems.push_back("the reference " + manifest_.front() + " (cluster.json's first node) is not in the run yet");
      return false;
    }
    r.ref = size_t(it - names.begin());
  } else {
    r.ref = size_t(std::min_element(names.begin(), names.end()) - names.begin());
  }
  return true;
}

// Every node pair's relation from the rounds read so far, as `translate
// --clock-model piecewise --inputs rounds` builds it (pair_relations.cpp build_pair),
// and each node's path to the reference.
void RunView::relate_nodes(Relations& r, std::vector<std::string>& problems) const {
  const size_t n = r.n;
  const auto& names = r.names;
  const auto& skew = r.skew;
  const auto& hz = r.hz;
  r.ppb = std::llround(opt_.max_drift_ppm * 1000);
  r.db.names = names;
  r.db.ref = r.ref;
  std::map<std::pair<size_t, size_t>, RelationEdge> edges;
  for (size_t x = 0; x < n; ++x)
    for (size_t y = 0; y < n; ++y) {
      if (x == y) continue;
      PairRounds pr = pair_rounds(rounds_with_peer(nodes_[x]->tail->sync_rounds(), names[y]),
                                  rounds_with_peer(nodes_[y]->tail->sync_rounds(), names[x]), skew[x], skew[y]);
      if (pr.rounds.empty()) continue;
      if (!(hz[x] > 0) || !(hz[y] > 0)) continue;  // said below
      auto drift = std::make_shared<DriftBoundRelation>(round_constraints(pr.rounds), r.ppb, hz[x], hz[y]);
      if (!drift->bounded()) continue;
      r.db.direct[{x, y}] = drift;
      r.drifts[{x, y}] = drift;
      try {
        const auto& pts = r.points[x];  // the node's clock span, as translate's TranslateNode has it
        int64_t lo = pts.empty() ? 0 : int64_t(pts.front().tsc), hi = pts.empty() ? 0 : int64_t(pts.back().tsc);
        edges[{x, y}] = {drift, edge_weight(*drift, lo, hi, pr)};
      } catch (const std::exception&) {
        // far outside the pair's span: not a usable edge (as translate)
      }
    }
  for (size_t i = 0; i < n; ++i)
    if (!(hz[i] > 0))
      problems.push_back(names[i] +
                         ": TSC frequency not known yet (no meta.json tsc_hz, fewer than two clock points): "
                         "not related to any node");
  r.paths = relation_paths(n, r.ref, edges);
  r.db.to_ref = r.paths.to_ref;
  for (const TscSkewHistory& h : r.skews) r.db.errs.push_back(StampErrors::from_skew(h));
  for (size_t i = 0; i < n; ++i)
    if (!r.db.to_ref[i])
      problems.push_back(names[i] + ": no MinRTT rounds relate it to the reference " + names[r.ref] + " yet");

  // Durations in ns over the reference stream's frequency interval (strict,
  // against CLOCK_MONOTONIC_RAW where the stream has it).
  if (r.points[r.ref].size() >= 2)
    r.f = ClockMap(nodes_[r.ref]->tail->clock()).tsc_frequency(0, r.points[r.ref].size() - 1);
}

// What the relations are a function of, besides the rounds: the skews, the
// paths and the node pairs related.
std::string RunView::structure_of(const Relations& r) {
  std::string structure = fmt::format("ref {} ppb {}", r.ref, r.ppb);
  for (size_t i = 0; i < r.n; ++i) {
    structure += fmt::format("|{} {}:", r.names[i], r.skew[i]);
    for (const auto& [cpu, e] : r.skews[i].cpu_err) structure += fmt::format(" cpu{} {}", cpu, e);
    for (size_t hop : r.paths.path[i]) structure += fmt::format(" {}", hop);
  }
  for (const auto& [xy, rel] : r.drifts) structure += fmt::format("|{}-{}", xy.first, xy.second);
  return structure;
}

// Bounds pair k's rows not bounded yet, and those (with `reuse`) whose relation
// changed; then the columns the selection reorders.
void RunView::bound_pair(size_t k, const Relations& r, bool reuse, const Unchanged& same) {
  Pair& p = pairs_[k];
  Bounds& c = p.bounds;
  const auto& db = r.db;
  const auto& skew = r.skew;
  std::vector<RelationCursor> cursors;
  static const IdentityRelation none;  // nodes without a path: their rows are skipped first
  for (size_t i = 0; i < r.n; ++i) cursors.emplace_back(db.to_ref[i] ? *db.to_ref[i] : none);
  auto bound_row = [&](size_t row) {
    last_bounded_++;
    const auto& [a, b] = p.rows[row];
    if (!db.to_ref[a.node] || !db.to_ref[b.node]) return c.set(row, Bounds::kUnrelated, {});
    try {
      // As the reader gives translate a stamp's error: its CPU's skew where it names one.
      auto err = [&](const Side& s) { return db.errs[s.node].of(s.cpu != Side::kNoCpu, s.cpu); };
      Bound ia = cursors[a.node].at_stamp(a.ts, err(a)), ib = cursors[b.node].at_stamp(b.ts, err(b));
      const char* scenario = "";
      Bound d = db.duration({a.ts, ia.est, ia.lo, ia.hi, a.node, a.cpu, a.cpu != Side::kNoCpu},
                            {b.ts, ib.est, ib.lo, ib.hi, b.node, b.cpu, b.cpu != Side::kNoCpu}, scenario);
      c.set(row, c.scenario_index(scenario), d);
    } catch (const std::exception& e) {
      if (c.failed == 0) c.problem = fmt::format("{} -> {}: {}", opt_.pairs[k].first, opt_.pairs[k].second, e.what());
      c.set(row, Bounds::kFailed, {});
    }
  };
  bool old_changed = false;
  if (reuse && !same.nothing_changed)  // rows bounded before: again only where a relation they query changed
    for (size_t row = 0; row < c.rows; ++row)
      if (!same.covers(p.rows[row].first, p.rows[row].second, skew, db)) bound_row(row), old_changed = true;
  for (; c.rows < p.rows.size(); ++c.rows) bound_row(c.rows);
  // The columns the selection reorders: the bounded rows' values, in any order;
  // built again when a row's bound changed, else only the new rows are added.
  if (!reuse || old_changed) c.sel_est.clear(), c.sel_lo.clear(), c.sel_hi.clear(), c.sel_rows = 0;
  for (; c.sel_rows < c.rows; ++c.sel_rows)
    if (c.scenario[c.sel_rows] < Bounds::kUnrelated)
      c.sel_est.push_back(c.est[c.sel_rows]), c.sel_lo.push_back(c.lo[c.sel_rows]),
          c.sel_hi.push_back(c.hi[c.sel_rows]);
}

// Pair k as JSON: its counts, scenarios and percentiles with their bounds.
json RunView::pair_summary(size_t k, const Relations& r) {
  Pair& p = pairs_[k];
  Bounds& c = p.bounds;
  std::vector<int64_t>&est = c.sel_est, &lo = c.sel_lo, &hi = c.sel_hi;
  std::map<std::string, uint64_t> scenarios;
  for (size_t i = 0; i < c.names.size(); ++i)
    if (c.count[i]) scenarios[c.names[i]] = c.count[i];
  const uint64_t unrelated = c.count[Bounds::kUnrelated], failed = c.failed;
  json j = {{"from", opt_.pairs[k].first},
            {"to", opt_.pairs[k].second},
            {"reference", r.names[r.ref]},
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
  add_bounded_percentiles(j, est, lo, hi, r.f);
  return j;
}

json RunView::pairs_json(Relations& r) {
  // The relations are a function of the rounds, the skews and the paths. While
  // the skews, the paths and the node pairs related stay as they were, a bound
  // computed before is exactly what a recomputation gives unless one of its
  // queries falls where a relation changed (unchanged_spans): only those tuples,
  // and the ones matched since, are bounded again.
  std::string structure = structure_of(r);
  const bool same_structure = generation_ > 0 && structure == structure_;
  Unchanged same;
  if (same_structure) same = unchanged_spans(r.drifts, prev_drifts_, r.paths.path, r.ref);
  const uint64_t generation = ++generation_;
  last_bounded_ = 0;

  json out = json::array();
  for (size_t k = 0; k < pairs_.size(); ++k) {
    Bounds& c = pairs_[k].bounds;
    // A failure's message is that of the first failing tuple: only a full pass keeps it so.
    bool reuse = same_structure && c.generation == generation - 1 && c.failed == 0;
    if (!reuse) c = Bounds{};
    c.generation = generation;
    bound_pair(k, r, reuse, same);
    if (!c.problem.empty()) r.problems.push_back(c.problem);
    out.push_back(pair_summary(k, r));
  }
  structure_ = structure;
  prev_drifts_ = std::move(r.drifts);
  return out;
}

// Two directories of one node name (a copy of a trace, two recordings of one
// node): rounds name their peers by node name, so what relates them cannot be
// told apart. Said, as translate refuses them ("overlapping recordings").
void RunView::same_named_nodes(std::vector<std::string>& problems) const {
  std::map<std::string, std::vector<std::string>> dirs;
  for (const auto& n : nodes_) dirs[n->name].push_back(fs::path(n->dir).filename().string());
  for (const auto& [name, d] : dirs)
    if (d.size() > 1)
      problems.push_back(
          fmt::format("node {} has {} traces ({}): overlapping recordings, whose rounds and pairs "
                      "cannot be told apart; keep one in the run",
                      name, d.size(), fmt::join(d, ", ")));
}

// --flows: every node's packets so far, bounded with this refresh's relations.
json RunView::flows_json(Relations& r) {
  std::vector<FlowNode> nodes;
  for (size_t i = 0; i < r.n; ++i) nodes.push_back({nodes_[i]->dir, r.names[i], r.db.to_ref[i].get()});
  json flows = run_flows(nodes, r.f, r.problems);
  for (json& f : flows) f["reference"] = r.names[r.ref];
  return flows;
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
  j["starting"] = starting();
  Relations r = node_clocks();
  same_named_nodes(r.problems);
  const bool related = pick_reference(r, r.problems);
  if (related) relate_nodes(r, r.problems);
  j["pairs"] = related ? pairs_json(r) : json::array();
  if (opt_.flows) j["flows"] = related ? flows_json(r) : json::array();
  if (kernel_stamped_)
    r.problems.push_back(fmt::format("{} kernel-stamped pair events not joined live", kernel_stamped_));
  j["problems"] = r.problems;
  return j;
}

}  // namespace cptrace
