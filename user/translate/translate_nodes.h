// The traces `translate` is given, opened and checked as a set: one per node
// (meta.json names it), none translated already, no node twice, no damage
// beyond a cut-off end, MinRTT rounds taken against these very recordings;
// which node is the reference; the packets they captured, matched across them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trace/sync_round.h"
#include "trace/trace_reader.h"
#include "translate/packet_pairs.h"

namespace cptrace {

struct TranslateNode {
  std::string name, dir;
  std::unique_ptr<TraceReader> reader;
  int64_t span_lo = 0, span_hi = 0;  // TSC range of its clock stream (0,0: none)
};

// "A->B", as pairs are named in messages and meta.json.
inline std::string pair_name(const std::vector<TranslateNode>& n, size_t a, size_t b) {
  return n[a].name + "->" + n[b].name;
}

// The readers are opened (each a validating scan of its whole file) on
// `threads` threads; their checks then run in the order given, so the first
// problem reported is the one a node-by-node opening would meet first.
std::vector<TranslateNode> open_nodes(const std::vector<std::string>& dirs, unsigned threads);
// The node whose TSC is the timebase: the one named, or without a name the only
// node there is (with several, which one is the user's choice).
size_t reference_index(const std::vector<TranslateNode>& nodes, const std::string& reference);
// The rounds n initiated with `peer`, as recorded (sync_pairs.h).
std::vector<SyncRound> rounds_with(const TranslateNode& n, const TranslateNode& peer);
// A round whose peer stamps lie far outside the peer's recording was taken against
// another recording of that node.
void check_matching(const std::vector<TranslateNode>& nodes, size_t x, size_t y);
// A warning on stderr for each peer whose rounds are ignored: no trace of it given.
void warn_unknown_peers(const std::vector<TranslateNode>& nodes);
// Every node's captured packets (record --net): transmits and receives as
// recorded, each stamp on the node's clock with its own error. `other`, when
// given, gets node i's other net events (socket calls) from the same pass.
std::vector<NodePackets> read_net_events(const std::vector<TranslateNode>& nodes,
                                         const std::function<void(size_t, const NetEvent&)>& other = {});
// One trace's part of that (top RUN reads each node's trace as it stands).
NodePackets read_node_packets(const TraceReader& r, const std::function<void(const NetEvent&)>& other = {});
// Every node's captured packets, matched across the traces.
PacketMatches read_packets(const std::vector<TranslateNode>& nodes);
// Pairs "X->Y" whose rounds X took without a key (meta.json minrtt.authenticated
// false: `--insecure`, or a recording made before keys were required).
std::vector<std::string> unauthenticated_rounds(const std::vector<TranslateNode>& nodes);

}  // namespace cptrace
