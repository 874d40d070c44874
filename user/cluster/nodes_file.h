// The nodes of a cluster run: the nodes file `cptrace cluster record` reads
// (docs/cluster.md describes it), and the O(N) MinRTT rounds topology.
//
// A node is a name (its directory under RUN/), a transport (the argv of a
// command that runs a program on the node with stdin/stdout: `ssh HOST`,
// `ip netns exec NS`, `kubectl exec POD --`), the cptrace binary there, the
// address its MinRTT responder listens on, and optionally its own workload and
// extra record options.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

struct ClusterNode {
  std::string name;
  std::vector<std::string> transport;  // argv prefix; the agent's argv follows it
  bool shell_transport = false;  // ssh: the remote side joins argv into a shell line
  std::string cptrace = "cptrace";  // the binary on the node
  std::string minrtt;  // HOST:PORT of its MinRTT responder
  std::string dir;  // node-side base directory of its own copy
  std::vector<std::string> command;  // its workload (empty: the run's common one)
  std::vector<std::string> record;  // extra `cptrace record` options for this node
};

struct ClusterSpec {
  std::vector<ClusterNode> nodes;
};

// Parses the nodes file's JSON. Throws std::runtime_error naming the node (or its
// index) and the field that is wrong.
ClusterSpec parse_nodes(const nlohmann::json& j);
ClusterSpec read_nodes_file(const std::string& path);
nlohmann::json to_json(const ClusterNode& n);

// The argv that runs `cptrace ARGS...` on node `n` through its transport; each
// word shell-quoted when the transport hands a command line to a shell (ssh).
std::vector<std::string> remote_argv(const ClusterNode& n, const std::vector<std::string>& args);

// The MinRTT topology: the indices of the nodes node `i` runs rounds with.
// Node 0 is the reference and initiates none; node i > 0 rounds with 0 and with
// its neighbour i - 1, so a run of N nodes has at most 2N - 3 pairs (O(N), not
// N(N-1)/2) and `translate` reaches every node from the reference along them.
std::vector<size_t> rounds_peers(size_t i);

}  // namespace cptrace
