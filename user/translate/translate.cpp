// cptrace translate: pair relations, paths to the reference, the frame-by-frame rewrite.
#include "translate/translate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <zstd.h>

#include "translate/drift_bound.h"
#include "translate/hull_sync.h"
#include "translate/packet_pairs.h"
#include "translate/pair_inputs.h"
#include "translate/unauthenticated_rounds.h"
#include "tables/memory_budget.h"
#include "tables/parallel_for.h"
#include "translate/ratio_sync.h"
#include "translate/realtime_offset.h"
#include "trace/tsc_frequency.h"
#include "translate/relation_cursor.h"
#include "translate/relation_paths.h"
#include "translate/sync_pairs.h"
#include "translate/sync_sanity.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

constexpr uint64_t kTscRange = kTranslateTscRange;  // relation_cursor.h

using nlohmann::json;

// The names of translate's choices, one table per option: name_of and the
// parse functions below read the same table.
template <class E>
struct Choice {
  E value;
  const char* name;
};
constexpr Choice<Method> kMethods[] = {{Method::Ratio, "ratio"}, {Method::Hull, "hull"}, {Method::Best, "best"}};
constexpr Choice<ClockModel> kClockModels[] = {{ClockModel::Linear, "linear"}, {ClockModel::Piecewise, "piecewise"}};
constexpr Choice<Inputs> kInputs[] = {{Inputs::Both, "both"}, {Inputs::Rounds, "rounds"}, {Inputs::Traffic, "traffic"}};

template <class E, size_t N>
std::string choice_name(const Choice<E> (&table)[N], E v) {
  for (const Choice<E>& c : table)
    if (c.value == v) return c.name;
  throw std::logic_error("translate option value without a name");
}

// "--method fast: must be ratio, hull or best".
template <class E, size_t N>
E parse_choice(const Choice<E> (&table)[N], std::string_view s, std::string_view what) {
  std::string names;
  for (size_t i = 0; i < N; ++i) {
    if (s == table[i].name) return table[i].value;
    names += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
  }
  throw std::invalid_argument(fmt::format("{} {}: must be {}", what, s, names));
}

struct Node {
  std::string name, dir;
  std::unique_ptr<TraceReader> reader;
  int64_t span_lo = 0, span_hi = 0;  // TSC range of its clock stream (0,0: none)
};

// Relations of the ordered pair from -> to, by method.
struct Pair {
  size_t from = 0, to = 0;
  PairRounds rounds;
  std::optional<RatioSync> ratio;
  std::string ratio_error;
  std::optional<HullSync> hull;
  std::shared_ptr<const DriftBoundRelation> drift;  // --clock-model piecewise
  PairInputs inputs;  // what the rounds and the matched traffic can each bound
  RelationPtr chosen;  // under the requested method
  std::string why_none;
  RelationPtr ratio_relation() const { return ratio ? ratio->relation : nullptr; }
};

std::string pair_name(const std::vector<Node>& n, size_t a, size_t b) { return n[a].name + "->" + n[b].name; }

// A damaged events.cpt is an error (its events cannot be trusted to be all there
// is); a cut-off end, what a killed recorder leaves, is translated up to its last
// whole frame with a warning saying what was left out.
void check_damage(const TraceReader& r) {
  if (!r.error()) return;
  if (!r.truncated_tail())
    throw std::runtime_error(std::string(r.error()->what()) +
                             " (damaged trace; `cptrace info` shows what is readable)");
  fmt::print(stderr,
             "cptrace translate: warning: {}: the file ends inside a frame; its last {} bytes, from byte {}, are "
             "ignored (what a killed recorder leaves)\n",
             r.events_path(), r.file_bytes() - r.valid_bytes(), r.valid_bytes());
}

// The readers are opened (each a validating scan of its whole file) on
// `threads` threads; their checks then run in the order given, so the first
// problem reported is the one a node-by-node opening would meet first.
std::vector<Node> open_nodes(const std::vector<std::string>& dirs, unsigned threads) {
  std::vector<std::unique_ptr<TraceReader>> readers(dirs.size());
  std::vector<std::exception_ptr> errors(dirs.size());
  parallel_for(threads, dirs.size(), [&](size_t i, unsigned) {
    try {
      readers[i] = std::make_unique<TraceReader>(dirs[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  std::vector<Node> nodes;
  std::map<std::string, std::string> seen;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& d = dirs[i];
    Node n;
    n.dir = d;
    if (errors[i]) std::rethrow_exception(errors[i]);
    n.reader = std::move(readers[i]);
    // The node name and clock facts live in meta.json: without it nothing can be translated.
    if (!n.reader->meta_problem().empty()) throw std::runtime_error(n.reader->meta_problem());
    n.name = n.reader->meta().value("node", "");
    if (n.name.empty()) throw std::runtime_error(d + ": meta.json names no node (no \"node\" field)");
    if (n.reader->meta().contains("translated"))
      throw std::runtime_error(d + ": is already a translated trace; give the per-node recordings");
    auto [it, fresh] = seen.emplace(n.name, d);
    if (!fresh)
      throw std::runtime_error(
          fmt::format("overlapping recordings: two traces of node \"{}\" ({} and {})", n.name, it->second, d));
    check_damage(*n.reader);
    const auto& cp = n.reader->clock_map().points();
    if (!cp.empty()) {
      n.span_lo = int64_t(cp.front().tsc);
      n.span_hi = int64_t(cp.back().tsc);
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// The node whose TSC is the timebase: the one named, or without a name the only
// node there is (with several, which one is the user's choice).
size_t reference_index(const std::vector<Node>& nodes, const std::string& reference) {
  std::string have;
  for (const Node& n : nodes) have += (have.empty() ? "" : ", ") + n.name;
  if (reference.empty()) {
    if (nodes.size() == 1) return 0;
    throw std::runtime_error(
        fmt::format("the traces hold {} nodes ({}): name the one whose TSC is the common "
                    "timebase with --reference",
                    nodes.size(), have));
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == reference) return i;
  throw std::runtime_error("--reference " + reference + ": no such node among the traces (" + have + ")");
}

// The rounds n initiated with `peer`, as recorded (sync_pairs.h).
std::vector<SyncRound> rounds_with(const Node& n, const Node& peer) {
  return rounds_with_peer(n.reader->sync_rounds(), peer.name);
}

// A round whose peer stamps lie far outside the peer's recording was taken against
// another recording of that node.
void check_matching(const std::vector<Node>& nodes, size_t x, size_t y) {
  const Node& p = nodes[y];
  if (p.span_hi <= p.span_lo) return;
  const std::vector<SyncRound> rounds = rounds_with(nodes[x], p);
  if (rounds.empty()) return;  // most pairs of a large cluster: no fit over the clock stream
  double hz = p.reader->clock_map().tsc_hz();
  int64_t slack = hz > 0 ? int64_t(hz * 10) : 0;  // 10 s: rounds just before start / after stop
  for (const SyncRound& r : rounds) {
    if (!r.kernel_ok) continue;
    int64_t t2 = int64_t(r.t2);
    if (t2 < p.span_lo - slack || t2 > p.span_hi + slack)
      throw std::runtime_error(fmt::format(
          "mismatched recordings: {} round seq {} ({}) with {} has {}'s stamp {} outside {}'s recording [{}, {}] "
          "({}) — traces from different runs?",
          nodes[x].name, r.seq, r.phase, p.name, p.name, r.t2, p.name, p.span_lo, p.span_hi, p.dir));
  }
}

void warn_unknown_peers(const std::vector<Node>& nodes) {
  std::set<std::string> names;
  for (const Node& n : nodes) names.insert(n.name);
  for (const Node& n : nodes) {
    std::map<std::string, size_t> unknown;
    for (const SyncRound& r : n.reader->sync_rounds())
      if (!names.count(r.peer)) unknown[r.peer]++;
    for (auto& [peer, k] : unknown)
      fmt::print(stderr,
                 "cptrace translate: warning: {} rounds of {} with peer \"{}\" ignored (no trace of {} given)\n", k,
                 n.name, peer, peer);
  }
}

// Every node's captured packets (record --net), matched across the traces.
PacketMatches read_packets(const std::vector<Node>& nodes) {
  std::vector<NodePackets> np(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].reader->for_each_net_event([&](const NetEvent& e) {
      if (e.r.kind != CP_NET_PKT_TX && e.r.kind != CP_NET_PKT_RX) return;
      // Causality holds for the true instants; with each stamp an interval, the
      // constraint that holds is "received no later than the latest possible
      // receive, sent no earlier than the earliest possible send".
      NetEvent c = e;
      c.ts =
          e.r.kind == CP_NET_PKT_TX ? e.ts - std::min<uint64_t>(e.ts, e.ts_err) : e.ts + std::min(e.ts_err, kTscRange);
      c.ts_err = 0;
      np[i].events.push_back(c);
    });
    np[i].complete = nodes[i].reader->net_counters().total_dropped() == 0;
  }
  return match_packets(np);
}

// Pairs "X->Y" whose rounds X took without a key (meta.json minrtt.authenticated
// false: `--insecure`, or a recording made before keys were required).
std::vector<std::string> unauthenticated_rounds(const std::vector<Node>& nodes) {
  std::set<std::string> names;
  for (const Node& n : nodes) names.insert(n.name);
  std::vector<std::string> out;
  for (const Node& n : nodes) {
    const json& m = n.reader->meta();
    if (!m.contains("minrtt") || m["minrtt"].value("authenticated", true)) continue;
    std::set<std::string> peers;
    for (const SyncRound& r : n.reader->sync_rounds())
      if (names.count(r.peer)) peers.insert(r.peer);
    for (const std::string& p : peers) out.push_back(n.name + "->" + p);
  }
  return out;
}

Pair build_pair(const std::vector<Node>& nodes, size_t x, size_t y, const TranslateOptions& opt,
                const PacketMatches& packets) {
  Pair p;
  p.from = x, p.to = y;
  p.rounds = pair_rounds(rounds_with(nodes[x], nodes[y]), rounds_with(nodes[y], nodes[x]),
                         nodes[x].reader->tsc_skew_err(), nodes[y].reader->tsc_skew_err());
  if (opt.inputs == Inputs::Traffic) p.rounds.rounds.clear();
  std::string name = pair_name(nodes, x, y);
  Constraints rounds = round_constraints(p.rounds.rounds), traffic;
  std::pair<size_t, size_t> counts{0, 0};
  if (opt.inputs != Inputs::Rounds) {
    traffic = packets.constraints(x, y);
    counts = packets.counts(x, y);
  }
  p.inputs = assess_inputs(rounds, p.rounds.rounds.size(), traffic, counts);
  if (opt.inputs == Inputs::Traffic) p.inputs.rounds_why = "not used (--inputs traffic)";
  if (opt.inputs == Inputs::Rounds) p.inputs.traffic_why = "not used (--inputs rounds)";
  if (p.rounds.rounds.empty()) {
    p.ratio_error = fmt::format("{}: no usable MinRTT rounds ({} without kernel stamps, {} inconsistent)", name,
                                p.rounds.not_kernel, p.rounds.inconsistent);
  } else {
    try {
      p.ratio = ratio_sync(p.rounds.rounds, name);
    } catch (const std::exception& e) {
      p.ratio_error = e.what();
    }
  }
  if (rounds.size() + traffic.size() == 0) {
    p.why_none = p.ratio_error + "; no matched packets";
    return p;
  }
  p.hull = hull_sync(merge(rounds, traffic));
  RelationPtr r = p.ratio ? p.ratio->relation : nullptr, h = p.hull->relation;
  std::string hull_error = h ? ""
                             : fmt::format("{}: hull method: {} (rounds alone: {}; traffic alone: {})", name,
                                           p.hull->problem, p.inputs.rounds_bound ? "bounded" : p.inputs.rounds_why,
                                           p.inputs.traffic_bound ? "bounded" : p.inputs.traffic_why);
  p.chosen = choose_relation(opt.method, r, h, p.hull->linear);
  switch (opt.method) {
    case Method::Ratio:
      p.why_none = p.ratio_error;
      break;
    case Method::Hull:
      p.why_none = hull_error;
      break;
    case Method::Best:
      if (!r || !h) p.why_none = p.ratio_error + "; " + hull_error;
      break;
  }
  if (opt.clock_model == ClockModel::Piecewise) {
    // Replaces the linear relation: it holds whatever the rates did, within the bound.
    // The rates are bounded around the nodes' nominal frequency ratio: nodes tick
    // at different rates (drift_bound.h), so an unknown frequency is an error.
    double hz[2];
    for (size_t k : {size_t(0), size_t(1)}) {
      const Node& n = nodes[k == 0 ? x : y];
      hz[k] = nominal_tsc_hz(n.reader->meta(), n.reader->clock_map());
      if (!(hz[k] > 0)) throw std::runtime_error(unknown_tsc_hz_error(n.name + " (" + n.dir + ")"));
    }
    p.drift = std::make_shared<DriftBoundRelation>(merge(rounds, traffic), std::llround(opt.max_drift_ppm * 1000),
                                                   hz[0], hz[1]);
    p.chosen = p.drift->bounded() ? p.drift : nullptr;
    p.why_none = p.drift->bounded() ? ""
                                    : fmt::format(
                                          "{}: piecewise model: constraints on one side only (rounds alone: "
                                          "{}; traffic alone: {})",
                                          name, p.inputs.rounds_why, p.inputs.traffic_why);
  }
  return p;
}

json pair_json(const std::vector<Node>& nodes, const Pair& p) {
  json j = {{"from", nodes[p.from].name},
            {"to", nodes[p.to].name},
            {"rounds", p.rounds.rounds.size()},
            {"rounds_without_kernel_stamps", p.rounds.not_kernel},
            {"rounds_inconsistent", p.rounds.inconsistent},
            {"inputs", p.inputs.to_json()}};
  if (p.ratio) {
    j["ratio"] = p.ratio->report();
    j["ratio"]["relation"] = p.ratio->relation->to_json();
  } else {
    j["ratio"] = {{"error", p.ratio_error}};
  }
  if (p.ratio && p.hull && !p.hull->linear && p.chosen == p.hull->relation)
    j["ratio"]["not_used"] = "the rounds' hulls cross: one line through MinRTT1 and MinRTT2 contradicts them";
  if (p.hull) {
    j["hull"] = p.hull->report();
    if (p.hull->relation) j["hull"]["relation"] = p.hull->relation->to_json();
  }
  if (p.drift)
    j["piecewise"] = {{"max_drift_ppm", double(p.drift->max_drift_ppb()) / 1000},
                      {"rate_interval", {double(p.drift->rates().lo) / 1e9, double(p.drift->rates().hi) / 1e9}},
                      {"kept_constraints", p.drift->kept()}};
  if (p.chosen)
    j["relation"] = p.chosen->to_json();
  else
    j["error"] = p.why_none;
  return j;
}

int64_t mid_span(const Node& n, const Pair& p) {
  if (n.span_hi > n.span_lo) return n.span_lo + (n.span_hi - n.span_lo) / 2;
  if (p.rounds.rounds.empty()) return 0;
  const PairRound& r = p.rounds.rounds.front();  // an instant of the from-node near its recording
  return r.x_initiated ? r.t1 : r.t2;
}

// Each node's relation to the reference (relation_paths.h), weighted by the bound
// width at the middle of the from-node's span.
std::vector<RelationPtr> paths_to_reference(const std::vector<Node>& nodes, size_t ref,
                                            const std::map<std::pair<size_t, size_t>, Pair>& pairs,
                                            std::vector<std::vector<std::string>>& path_names) {
  std::map<std::pair<size_t, size_t>, RelationEdge> edges;
  for (const auto& [k, p] : pairs) {
    if (!p.chosen) continue;
    long double w;
    try {
      w = (long double)p.chosen->at(mid_span(nodes[p.from], p)).width();
    } catch (const std::exception&) {
      continue;  // far outside the pair's span: not a usable edge
    }
    // A non-linear pair has transitions where nothing is guaranteed: any linear
    // path, however wide, is preferred.
    if (p.hull && !p.hull->linear && !p.drift && p.chosen != p.ratio_relation()) w += 1e30L;
    edges[k] = {p.chosen, w};
  }
  RelationPaths paths = relation_paths(nodes.size(), ref, edges);
  path_names.assign(nodes.size(), {});
  for (size_t v = 0; v < nodes.size(); ++v)
    for (size_t k : paths.path[v]) path_names[v].push_back(nodes[k].name);
  return paths.to_ref;
}

std::string no_path_error(const std::vector<Node>& nodes, size_t v, size_t ref,
                          const std::map<std::pair<size_t, size_t>, Pair>& pairs) {
  std::string why;
  for (size_t u = 0; u < nodes.size(); ++u) {
    if (u == v) continue;
    auto it = pairs.find({v, u});
    why += "\n  " + (it == pairs.end()
                         ? pair_name(nodes, v, u) + ": no MinRTT rounds in either trace and no matched packets"
                     : it->second.why_none.empty() ? pair_name(nodes, v, u) + ": usable"
                                                   : it->second.why_none);
  }
  return fmt::format("node \"{}\" ({}) has no path of synchronized node pairs to the reference \"{}\":{}",
                     nodes[v].name, nodes[v].dir, nodes[ref].name, why);
}

// TSC frequency of the reference for seconds: clock-stream points nearest to the
// first MinRTT1 and last MinRTT2 instants on the reference, as a strict interval
// against CLOCK_MONOTONIC_RAW (trace/tsc_frequency.h: why not MONOTONIC).
json measure_frequency(const Node& ref, const std::map<std::pair<size_t, size_t>, Pair>& pairs, size_t ref_idx) {
  const auto& pts = ref.reader->clock_map().points();
  json j = {{"stream_hz", ref.reader->clock_map().tsc_hz()}};
  if (pts.size() < 2) {
    j["error"] = "reference has fewer than two clock-correlation points: durations in ns unavailable";
    return j;
  }
  int64_t a = std::numeric_limits<int64_t>::max(), b = std::numeric_limits<int64_t>::min();
  for (const auto& [k, p] : pairs)
    if (p.to == ref_idx && p.ratio) {
      a = std::min(a, p.ratio->j.y);
      b = std::max(b, p.ratio->m.y);
    }
  std::string source = "reference clock stream between the MinRTT1 and MinRTT2 instants";
  if (a >= b) {
    a = int64_t(pts.front().tsc);
    b = int64_t(pts.back().tsc);
    source = "reference clock stream, first to last point";
  }
  auto nearest = [&](int64_t t) {
    auto it = std::min_element(pts.begin(), pts.end(), [t](const ClockPoint& x, const ClockPoint& y) {
      return std::llabs(int64_t(x.tsc) - t) < std::llabs(int64_t(y.tsc) - t);
    });
    return size_t(it - pts.begin());
  };
  const ClockMap& map = ref.reader->clock_map();
  size_t i1 = nearest(a), i2 = nearest(b);
  auto f = map.tsc_frequency(i1, i2);
  if (!f) {
    i1 = 0, i2 = pts.size() - 1;
    f = map.tsc_frequency(i1, i2);
  }
  const ClockPoint &p1 = pts[i1], &p2 = pts[i2];
  if (!f) {
    j["error"] = "reference clock stream does not advance: durations in ns unavailable";
    return j;
  }
  j["hz"] = f->hz;
  j["hz_lo"] = f->lo;
  j["hz_hi"] = f->hi;
  j["clock"] = f->clock();
  j["span_s"] = double(p2.mono_ns - p1.mono_ns) / 1e9;
  j["source"] = source + ", against " + f->clock();
  // A TSC rate change in the stretch: the interval holds both sides' rates.
  if (uint64_t n = map.model_stats().tsc_rate_changes) {
    j["tsc_rate_changes"] = n;
    j["source"] = j["source"].get<std::string>() + fmt::format(", widened over the TSC's {} rate change(s)", n);
  }
  return j;
}

// The physics check of every node pair's rounds (sync_sanity.h), once per
// unordered pair (the two directions hold the same rounds mirrored). With
// --method ratio, hulls that cross are a finding too: the ratio's one line
// ignores the split.
json check_sync(const std::vector<Node>& nodes, const std::map<std::pair<size_t, size_t>, Pair>& pairs, Method method,
                std::vector<SyncFinding>& findings) {
  json checks = json::array();
  for (const auto& [k, p] : pairs) {
    if (p.from > p.to || p.rounds.rounds.empty()) continue;
    int64_t xlo = INT64_MAX, xhi = INT64_MIN, ylo = INT64_MAX, yhi = INT64_MIN;
    for (const PairRound& r : p.rounds.rounds) {
      xlo = std::min({xlo, r.x_initiated ? r.t1 : r.t2}), xhi = std::max({xhi, r.x_initiated ? r.t4 : r.t3});
      ylo = std::min({ylo, r.x_initiated ? r.t2 : r.t1}), yhi = std::max({yhi, r.x_initiated ? r.t3 : r.t4});
    }
    SyncCheck c = check_pair_sync(p.rounds.rounds, nodes[p.from].name, nodes[p.to].name,
                                  stream_rate(nodes[p.from].reader->clock_map().points(), xlo, xhi),
                                  stream_rate(nodes[p.to].reader->clock_map().points(), ylo, yhi));
    if (method == Method::Ratio && p.hull && !p.hull->linear)
      c.findings.push_back(crossing_not_split(c.pair, p.hull->segments.size()));
    if (!c.not_checked.empty())
      fmt::print(stderr, "cptrace translate: warning: {}: rounds not checked against the clocks' rates: {}\n", c.pair,
                 c.not_checked);
    if (!c.rate_clock_note.empty()) fmt::print(stderr, "cptrace translate: note: {}: {}\n", c.pair, c.rate_clock_note);
    findings.insert(findings.end(), c.findings.begin(), c.findings.end());
    checks.push_back(c.to_json());
  }
  return checks;
}

json channels_json(const std::vector<Node>& nodes) {
  std::map<uint64_t, std::string> names;
  for (const Node& n : nodes)
    for (const auto& [id, c] : n.reader->channels()) names.emplace(id, c.name);
  json a = json::array();
  for (auto& [id, name] : names) a.push_back({{"id", id}, {"name", name}, {"pid", 0}});
  return a;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// One input frame of a node translated into one output frame, on any thread.
// An error (a timestamp beyond the supported range, disjoint bounds) is kept
// with its frame: it is raised when that frame's turn to be written comes.
struct FrameOut {
  EncodedFrame frame;
  uint64_t events = 0, in_transition = 0, max_err = 0;
  std::exception_ptr error;
};

void translate_frame(const Node& n, size_t i, uint16_t index, RelationCursor& cursor, const Ranges& transitions,
                     int level, FrameOut& f) {
  thread_local std::vector<TraceEvent> evs;
  thread_local std::vector<TranslatedEvent> out;
  n.reader->read_events(i, evs);
  out.resize(evs.size());
  uint64_t in_transition = 0, max_err = 0;
  for (size_t k = 0; k < evs.size(); ++k) {
    const TraceEvent& e = evs[k];
    if (e.ts > kTscRange)
      throw std::runtime_error(fmt::format("{}: event timestamp {} is beyond the supported TSC range", n.dir, e.ts));
    Bound b = cursor.at_stamp(e.ts, e.ts_err);  // a stamp's own interval widens the bound
    for (const auto& [lo, hi] : transitions) in_transition += int64_t(e.ts) >= lo && int64_t(e.ts) <= hi;
    max_err = std::max(max_err, e.ts_err);
    out[k] = {e.ts, b.est, b.lo, b.hi, e.channel, e.tuple, e.pid, e.tid, e.cpu, index, e.kind};
  }
  encode_translated(out.data(), out.size(), level, f.frame);
  f.events = out.size(), f.in_transition = in_transition, f.max_err = max_err;
}

// Translates one node's events through its relation, frame by frame, a batch
// of frames at a time on `threads` threads (each with its own cursor: a
// cursor's answers are Relation::at's whatever it cached), written in file
// order. Counts the events inside `transitions` (local clock ranges where the
// first hop of the node's path is non-linear and the bound is not guaranteed).
uint64_t translate_node(const Node& n, uint16_t index, const Relation& rel, const Ranges& transitions, unsigned threads,
                        int level, uint64_t& in_transition, uint64_t& max_err, TraceWriter& w) {
  const size_t frames = n.reader->event_frame_count();
  if (frames == 0) n.reader->for_each_batch([](const std::vector<TraceEvent>&) {});  // its checks, as before
  std::vector<RelationCursor> cursors(threads, RelationCursor(rel));
  // A few frames a thread per batch: decoded and encoded frames are a fixed
  // cost, whatever the trace's size.
  const size_t batch = threads > 1 ? 4 * size_t(threads) : 1;
  std::vector<FrameOut> outs(std::min(batch, frames));
  uint64_t count = 0;
  for (size_t at = 0; at < frames; at += batch) {
    const size_t k = std::min(batch, frames - at);
    parallel_for(threads, k, [&](size_t j, unsigned worker) {
      FrameOut& f = outs[j];
      f.error = nullptr;
      try {
        translate_frame(n, at + j, index, cursors[worker], transitions, level, f);
      } catch (...) {
        f.error = std::current_exception();
      }
    });
    for (size_t j = 0; j < k; ++j) {
      if (outs[j].error) std::rethrow_exception(outs[j].error);
      w.write(outs[j].frame);
      count += outs[j].events;
      in_transition += outs[j].in_transition;
      max_err = std::max(max_err, outs[j].max_err);
    }
  }
  return count;
}

}  // namespace

TranslateSummary translate(const TranslateOptions& opt) {
  if (!(opt.max_drift_ppm > 0) || opt.max_drift_ppm > 100000)
    throw std::runtime_error(fmt::format("--max-drift-ppm {}: must be in (0, 100000]", opt.max_drift_ppm));
  if (opt.compression_level < ZSTD_minCLevel() || opt.compression_level > ZSTD_maxCLevel())
    throw std::runtime_error(fmt::format("--compression-level {}: must be a zstd level in [{}, {}]",
                                         opt.compression_level, ZSTD_minCLevel(), ZSTD_maxCLevel()));
  if (opt.dirs.empty()) throw std::runtime_error("no trace directories given");
  MemoryBudget cpus;
  cpus.threads = opt.threads;
  const unsigned threads = cpus.thread_count();
  std::vector<Node> nodes = open_nodes(opt.dirs, threads);
  if (nodes.size() > 0xffff) throw std::runtime_error("more than 65535 nodes");
  size_t ref = reference_index(nodes, opt.reference);
  warn_unknown_peers(nodes);
  PacketMatches packets = read_packets(nodes);
  std::map<std::pair<size_t, size_t>, Pair> pairs;
  for (size_t x = 0; x < nodes.size(); ++x)
    for (size_t y = 0; y < nodes.size(); ++y) {
      if (x == y) continue;
      check_matching(nodes, x, y);
      Pair p = build_pair(nodes, x, y, opt, packets);
      if (!p.rounds.rounds.empty() || p.rounds.not_kernel + p.rounds.inconsistent > 0 ||
          p.inputs.packets_out + p.inputs.packets_in > 0)
        pairs.emplace(std::pair{x, y}, std::move(p));
    }
  // Rounds that contradict physics come first: they are why any later step fails.
  std::vector<SyncFinding> findings;
  json checks = check_sync(nodes, pairs, opt.method, findings);
  if (!findings.empty() && !opt.accept_suspect_sync)
    throw std::runtime_error(suspect_sync_error(findings, "translate"));
  std::vector<std::vector<std::string>> path_names;
  std::vector<RelationPtr> to_ref = paths_to_reference(nodes, ref, pairs, path_names);
  for (size_t v = 0; v < nodes.size(); ++v)
    if (!to_ref[v]) throw std::runtime_error(no_path_error(nodes, v, ref, pairs));

  json tr = {{"reference", nodes[ref].name},
             {"method", name_of(opt.method)},
             {"clock_model", name_of(opt.clock_model)},
             {"inputs", name_of(opt.inputs)}};
  if (opt.clock_model == ClockModel::Piecewise) tr["max_drift_ppm"] = opt.max_drift_ppm;
  // Only a chosen level is written: the default's meta.json stays as it was.
  if (opt.compression_level != kTranslateDefaultLevel) tr["compression_level"] = opt.compression_level;
  tr["sync_check"] = checks;
  if (!findings.empty()) {
    tr["suspect_sync"] = json::array();
    for (const SyncFinding& f : findings) tr["suspect_sync"].push_back(f.to_json());
  }
  std::vector<std::string> unauth = unauthenticated_rounds(nodes);
  if (!unauth.empty()) {
    tr["unauthenticated_rounds"] = unauth;
    fmt::print(stderr, "cptrace translate: {}\n", unauthenticated_warning(unauth));
  }
  tr["frequency"] = measure_frequency(nodes[ref], pairs, ref);
  tr["packets"] = packets.total.to_json();
  tr["pairs"] = json::array();
  for (auto& [k, p] : pairs) tr["pairs"].push_back(pair_json(nodes, p));
  tr["realtime_offsets"] = json::array();
  for (size_t v = 0; v < nodes.size(); ++v)
    if (v != ref)
      tr["realtime_offsets"].push_back(measure_realtime_offset(nodes[v].name, nodes[v].reader->clock_map().points(),
                                                               *to_ref[v], nodes[ref].name,
                                                               nodes[ref].reader->clock_map())
                                           .to_json());
  for (size_t v = 0; v < nodes.size(); ++v) {
    json nj = {{"index", v},
               {"node", nodes[v].name},
               {"dir", nodes[v].dir},
               {"span_tsc", {nodes[v].span_lo, nodes[v].span_hi}},
               {"tsc_hz_stream", nodes[v].reader->clock_map().tsc_hz()},
               {"path", path_names[v]},
               {"to_reference", to_ref[v]->to_json()},
               {"clock_model", clock_model_json(nodes[v].reader->clock_map())}};
    if (v != ref && nodes[v].span_hi > nodes[v].span_lo)
      nj["width_mid_ticks"] = to_ref[v]->at(nodes[v].span_lo + (nodes[v].span_hi - nodes[v].span_lo) / 2).width();
    tr["nodes"].push_back(nj);
  }
  json meta = {{"node", "translated:" + nodes[ref].name}, {"translated", tr}, {"complete", false}};

  TraceWriter w(opt.out, meta, opt.overwrite);
  json chans = channels_json(nodes);
  w.write(encode_json(FrameType::Channels, chans.dump(), uint32_t(chans.size())));
  TranslateSummary s;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t v = 0; v < nodes.size(); ++v) {
    Ranges transitions;
    if (v != ref && opt.method != Method::Ratio && opt.clock_model == ClockModel::Linear) {
      size_t hop = 0;
      while (nodes[hop].name != path_names[v][1]) ++hop;
      const Pair& p = pairs.at({v, hop});
      if (p.hull) transitions = p.hull->transitions();
    }
    uint64_t in_transition = 0, max_err = 0;
    uint64_t k = translate_node(nodes[v], uint16_t(v), *to_ref[v], transitions, threads, opt.compression_level,
                                in_transition, max_err, w);
    meta["translated"]["nodes"][v]["events"] = k;
    // The largest error of a stamp on the node's own TSC (conversion, skew across
    // CPUs): latency widens same-node durations by it (latency.h).
    meta["translated"]["nodes"][v]["max_ts_err"] = std::min(max_err, kTscRange);
    meta["translated"]["nodes"][v]["events_in_transition"] = in_transition;
    if (in_transition)
      fmt::print(stderr,
                 "cptrace translate: warning: {} events of {} lie where its clock relation to {} changes rate "
                 "(hull transition): their bounds are NOT guaranteed\n",
                 in_transition, nodes[v].name, path_names[v][1]);
    s.events += k;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  meta["translated"]["events"] = s.events;
  meta["translated"]["seconds"] = secs;
  meta["complete"] = true;
  w.finish(meta);
  s.meta = meta;
  return s;
}

std::string name_of(Method m) { return choice_name(kMethods, m); }
std::string name_of(ClockModel m) { return choice_name(kClockModels, m); }
std::string name_of(Inputs i) { return choice_name(kInputs, i); }
Method parse_method(std::string_view s, std::string_view what) { return parse_choice(kMethods, s, what); }
ClockModel parse_clock_model(std::string_view s, std::string_view what) { return parse_choice(kClockModels, s, what); }
Inputs parse_inputs(std::string_view s, std::string_view what) { return parse_choice(kInputs, s, what); }

RelationPtr choose_relation(Method method, const RelationPtr& ratio, const RelationPtr& hull, bool hull_linear) {
  switch (method) {
    case Method::Ratio:
      return ratio;
    case Method::Hull:
      return hull;
    case Method::Best:
      break;
  }
  if (ratio && hull && !hull_linear) return hull;  // the ratio's one line contradicts crossing hulls: split
  if (ratio && hull) return std::make_shared<IntersectRelation>(ratio, hull);
  return ratio ? ratio : hull;
}

RelationPtr pair_relation(const json& pair, Method method) {
  auto get = [&](const char* m) -> RelationPtr {
    if (!pair.contains(m) || !pair[m].contains("relation")) return nullptr;
    return relation_from_json(pair[m]["relation"]);
  };
  // --clock-model piecewise: the rate-bounded relation replaced the linear methods.
  if (pair.contains("piecewise")) return pair.contains("relation") ? relation_from_json(pair["relation"]) : nullptr;
  // Only the relations `method` can use are read.
  RelationPtr r = method == Method::Hull ? nullptr : get("ratio");
  RelationPtr h = method == Method::Ratio ? nullptr : get("hull");
  return choose_relation(method, r, h, !pair.contains("hull") || pair["hull"].value("linear", true));
}

int cmd_translate(const TranslateOptions& opt) {
  TranslateSummary s = translate(opt);
  const json& tr = s.meta["translated"];
  fmt::print("translated {} events of {} nodes onto {}'s TSC (method {}) in {:.2f} s -> {}\n", s.events,
             tr["nodes"].size(), tr["reference"].get<std::string>(), name_of(opt.method), tr["seconds"].get<double>(),
             opt.out);
  for (const json& n : tr["nodes"]) {
    std::string path;
    for (const auto& p : n["path"]) path += (path.empty() ? "" : " -> ") + p.get<std::string>();
    fmt::print("  {:<12} {:10} events  path {}", n["node"].get<std::string>(), n["events"].get<uint64_t>(), path);
    if (n.contains("width_mid_ticks"))
      fmt::print("  bound width mid-span {} ticks", n["width_mid_ticks"].get<int64_t>());
    fmt::print("\n");
  }
  const json& pk = tr["packets"];
  if (pk["receives"].get<uint64_t>() > 0)
    fmt::print(
        "  packets: {} receives, {} matched, {} ambiguous (discarded), {} unmatched, {} without "
        "handshake, {} from senders that dropped records\n",
        pk["receives"].get<uint64_t>(), pk["matched"].get<uint64_t>(), pk["ambiguous"].get<uint64_t>(),
        pk["unmatched"].get<uint64_t>(), pk["no_handshake"].get<uint64_t>(), pk["lossy_sender"].get<uint64_t>());
  for (const json& p : tr["pairs"]) {
    const json& in = p["inputs"];
    const std::string from = p["from"].get<std::string>(), to = p["to"].get<std::string>();
    fmt::print("  pair {}->{} bounded by {} ({} rounds, {}/{} packets each way)", from, to,
               in["bounded_by"].get<std::string>(), in["rounds"].get<size_t>(), in["packets_from_to"].get<size_t>(),
               in["packets_to_from"].get<size_t>());
    for (const char* k : {"rounds_alone", "traffic_alone"})
      if (in.contains(k)) fmt::print("; {}: {}", k, in[k].get<std::string>());
    fmt::print("\n");
    if (p.contains("hull") && !p["hull"].value("linear", true))
      fmt::print("  NON-LINEAR {}->{}: {}\n", from, to, p["hull"]["nonlinear"].get<std::string>());
    if (p.contains("error")) fmt::print("  pair {}->{} unusable: {}\n", from, to, p["error"].get<std::string>());
  }
  for (const json& c : tr.value("sync_check", json::array()))
    if (c.contains("line_rate_ppm"))
      fmt::print("  pair {}: rounds' rate vs the nodes' own TSC frequencies {:+.2f}..{:+.2f} ppm (limit +-{:.0f})\n",
                 c["pair"].get<std::string>(), c["line_rate_ppm"][0].get<double>(), c["line_rate_ppm"][1].get<double>(),
                 c["limit_ppm"].get<double>());
  for (const json& f : tr.value("suspect_sync", json::array()))
    fmt::print("  {}\n", suspect_sync_warning(SyncFinding::from_json(f)));
  for (const json& n : tr["nodes"]) {
    const json& cm = n["clock_model"];
    uint64_t violated = cm["violated"].get<uint64_t>(), crowded = cm["crowded"].get<uint64_t>(),
             departed = cm.value("departed", uint64_t(0));
    if (violated + crowded + departed > 0)
      fmt::print(
          "  {}: kernel stamps in {} of {} correlation segments bounded without the clock model "
          "(its assumption failed there: {} violated, {} with two clock adjustments, {} where "
          "CLOCK_MONOTONIC_RAW left its TSC line); wider, not wrong\n",
          n["node"].get<std::string>(), violated + crowded + departed, cm["segments"].get<uint64_t>(), violated,
          crowded, departed);
    if (uint64_t r = cm.value("tsc_rate_changes", uint64_t(0)))
      fmt::print("  {}: the TSC changed its rate {} time(s) (a live migration?): each side has its own line\n",
                 n["node"].get<std::string>(), r);
  }
  for (const json& o : tr.value("realtime_offsets", json::array())) fmt::print("  {}\n", realtime_offset_line(o));
  const json& f = tr["frequency"];
  if (f.contains("hz"))
    fmt::print("  reference TSC {:.6f} GHz [{:.9f}, {:.9f}] ({})\n", f["hz"].get<double>() / 1e9,
               f["hz_lo"].get<double>() / 1e9, f["hz_hi"].get<double>() / 1e9, f["source"].get<std::string>());
  return 0;
}

}  // namespace cptrace
