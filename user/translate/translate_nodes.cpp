// The traces translate is given, as a set: see translate_nodes.h.
#include "translate/translate_nodes.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tables/parallel_for.h"
#include "translate/relation_cursor.h"
#include "translate/sync_pairs.h"
#include "os/say.h"

namespace cptrace {
namespace {

// A damaged events.cpt is an error (its events cannot be trusted to be all there
// is); a cut-off end, what a killed recorder leaves, is translated up to its last
// whole frame with a warning saying what was left out.
void check_damage(const TraceReader& r) {
  if (!r.error()) return;
  if (!r.truncated_tail())
    throw std::runtime_error(std::string(r.error()->what()) +
                             " (damaged trace; `cptrace info` shows what is readable)");
  say("warning: {}: the file ends inside a frame; its last {} bytes, from byte {}, are "
      "ignored (what a killed recorder leaves)",
      r.events_path(), r.file_bytes() - r.valid_bytes(), r.valid_bytes());
}

}  // namespace

// The readers are opened (each a validating scan of its whole file) on
// `threads` threads; their checks then run in the order given, so the first
// problem reported is the one a node-by-node opening would meet first.
std::vector<TranslateNode> open_nodes(const std::vector<std::string>& dirs, unsigned threads) {
  std::vector<std::unique_ptr<TraceReader>> readers(dirs.size());
  std::vector<std::exception_ptr> errors(dirs.size());
  parallel_for(threads, dirs.size(), [&](size_t i, unsigned) {
    try {
      readers[i] = std::make_unique<TraceReader>(dirs[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  std::vector<TranslateNode> nodes;
  std::map<std::string, std::string> seen;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& d = dirs[i];
    TranslateNode n;
    n.dir = d;
    if (errors[i]) std::rethrow_exception(errors[i]);
    n.reader = std::move(readers[i]);
    // The node name and clock facts live in meta.json: without it nothing can be translated.
    if (!n.reader->meta_problem().empty()) throw std::runtime_error(n.reader->meta_problem());
    n.name = n.reader->trace_meta().node;
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
size_t reference_index(const std::vector<TranslateNode>& nodes, const std::string& reference) {
  std::string have;
  for (const TranslateNode& n : nodes) have += (have.empty() ? "" : ", ") + n.name;
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
std::vector<SyncRound> rounds_with(const TranslateNode& n, const TranslateNode& peer) {
  return rounds_with_peer(n.reader->sync_rounds(), peer.name);
}

// A round whose peer stamps lie far outside the peer's recording was taken against
// another recording of that node.
void check_matching(const std::vector<TranslateNode>& nodes, size_t x, size_t y) {
  const TranslateNode& p = nodes[y];
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

void warn_unknown_peers(const std::vector<TranslateNode>& nodes) {
  std::set<std::string> names;
  for (const TranslateNode& n : nodes) names.insert(n.name);
  for (const TranslateNode& n : nodes) {
    std::map<std::string, size_t> unknown;
    for (const SyncRound& r : n.reader->sync_rounds())
      if (!names.count(r.peer)) unknown[r.peer]++;
    for (auto& [peer, k] : unknown)
      say("warning: {} rounds of {} with peer \"{}\" ignored (no trace of {} given)", k, n.name, peer, peer);
  }
}

std::vector<NodePackets> read_net_events(const std::vector<TranslateNode>& nodes,
                                         const std::function<void(size_t, const NetEvent&)>& other) {
  std::vector<NodePackets> np(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    np[i] = read_node_packets(*nodes[i].reader,
                              other ? [&](const NetEvent& e) { other(i, e); } : std::function<void(const NetEvent&)>());
  return np;
}

NodePackets read_node_packets(const TraceReader& r, const std::function<void(const NetEvent&)>& other) {
  NodePackets np;
  r.for_each_net_event([&](const NetEvent& e) {
    if (e.r.kind == CP_NET_PKT_TX || e.r.kind == CP_NET_PKT_RX)
      np.events.push_back(e);
    else if (other)
      other(e);
  });
  np.complete = r.net_counters().total_dropped() == 0;
  return np;
}

PacketMatches read_packets(const std::vector<TranslateNode>& nodes) { return match_packets(read_net_events(nodes)); }

// Pairs "X->Y" whose rounds X took without a key (meta.json minrtt.authenticated
// false: `--insecure`, or a recording made before keys were required).
std::vector<std::string> unauthenticated_rounds(const std::vector<TranslateNode>& nodes) {
  std::set<std::string> names;
  for (const TranslateNode& n : nodes) names.insert(n.name);
  std::vector<std::string> out;
  for (const TranslateNode& n : nodes) {
    const nlohmann::json& m = n.reader->meta();
    if (!m.contains("minrtt") || m["minrtt"].value("authenticated", true)) continue;
    std::set<std::string> peers;
    for (const SyncRound& r : n.reader->sync_rounds())
      if (names.count(r.peer)) peers.insert(r.peer);
    for (const std::string& p : peers) out.push_back(n.name + "->" + p);
  }
  return out;
}

}  // namespace cptrace
