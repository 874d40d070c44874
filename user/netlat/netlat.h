// `cptrace netlat`: the one-way delay of every packet matched between two
// recorded nodes (`record --net`): its transmit on the sender (`tx`, closest to
// the wire) to its receive on the receiver (`rx`), both stamps put on the
// reference node's clock by the relations translate would use (run_relations.h),
// each delay with a strict bound; per flow and direction, counts and
// percentiles with their bounds (docs/net.md, "One-way delay").
//
// The stages: the node traces opened and related (translate/), every packet's
// delay bounded (packet_delays.h), grouped by flow (flow_stats.h), printed
// (netlat_output.h).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "netlat/flow_stats.h"
#include "netlat/write_delays.h"
#include "translate/translate_options.h"

namespace cptrace {

struct NetlatOptions {
  TranslateOptions relate;  // dirs, --reference and the relation's choices
  std::string from, to;  // node names (empty: any)
  std::optional<uint16_t> port;  // either end of the flow
  std::string addr;  // either end of the flow (IPv4 or IPv6 text)
  // A process (tgid) at either end: a packet whose transmit or receive the
  // recorder attributed to it (record.pid, from the task or the flow's owner).
  std::optional<uint32_t> pid;
  // A cgroup (v2 id) at either end, the same way: the task's cgroup as the
  // recorder saw it (record.cgroup; traces from before it carry none and match
  // no cgroup). --cgroup and --container resolve to it (os/cgroup_dirs.h).
  std::optional<uint64_t> cgroup;
  // A time window, seconds since the reference node's recording start on its
  // clock: a packet is in it when its transmit's estimate on the reference is
  // (since <= t < until); unmatched packets by their own stamp the same way.
  std::optional<double> since_s, until_s;
  // --writes: the application's view of the TCP and UDP flows instead
  // (write_delays.h, message_delays.h).
  bool writes = false;
};

// --writes, per TCP or UDP flow and direction: what the sender wrote and the delays.
struct WriteLink {
  WriteCounts counts;
  FlowLink delays;
};
using LinkKey = std::pair<FlowId, std::pair<uint32_t, uint32_t>>;  // (flow, (tx, rx node))

struct NetlatResult {
  std::string reference;
  std::vector<std::string> nodes;
  nlohmann::json relation;  // method, clock model, inputs; per pair what bounded it
  FlowTable flows;
  PacketMatchStats matching;  // over every node, before the filters
  bool writes_asked = false;  // --writes
  std::map<LinkKey, WriteLink> writes;
};

// `each`, when set, sees every packet that passes the filters, in the order of
// the receiving node and its receive stamp (the CSV rows), with the result's
// header (reference, nodes) already filled in.
using NetlatSink = std::function<void(const NetlatResult&, const PacketDelay&)>;
// With --writes, `each_write` sees every measured write (after every packet).
using WriteSink = std::function<void(const NetlatResult&, const WriteDelay&)>;
NetlatResult netlat(const NetlatOptions& opt, const NetlatSink& each = nullptr, const WriteSink& each_write = nullptr);

}  // namespace cptrace
