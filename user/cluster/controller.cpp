// The controller's two commands, each its stages in order: check the nodes
// (node_check), start the agents, stream into RUN/NODE/ (stream_loop,
// node_copy), complete the copies, translate and report (run_finish), and
// say what became of each node (run_manifest).
#include "cluster/controller.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cluster/node_check.h"
#include "cluster/node_copy.h"
#include "cluster/node_run.h"
#include "cluster/nodes_file.h"
#include "cluster/run_finish.h"
#include "cluster/run_manifest.h"
#include "cluster/stream_loop.h"
#include "sync/minrtt_protocol.h"
#include "os/say.h"

namespace cptrace {

using namespace cluster;

namespace {

// The options every recorder gets, then this node's MinRTT peers and its own.
std::vector<std::string> record_args(const ClusterRecordOptions& o, const std::vector<NodeRun>& nodes, size_t i) {
  std::vector<std::string> a = o.record_args;
  const std::string& me = nodes[i].spec.minrtt;
  if (nodes.size() > 1) {
    a.insert(a.end(), {"--minrtt-listen", "[::]" + me.substr(me.rfind(':'))});
    // Nodes stop one after the other (each when its workload ends): a responder
    // must outlast its node's stop so that the later nodes still get MinRTT2.
    a.insert(a.end(), {"--sync-linger", fmt::format("{}", o.stop_linger_s)});
    std::string peers;
    for (size_t k : rounds_peers(i)) peers += (peers.empty() ? "" : ",") + nodes[k].spec.minrtt;
    if (!peers.empty()) a.insert(a.end(), {"--peers", peers});
  }
  a.insert(a.end(), nodes[i].spec.record.begin(), nodes[i].spec.record.end());
  return a;
}

}  // namespace

int run_cluster_record(const ClusterRecordOptions& o) {
  ClusterSpec spec = read_nodes_file(o.nodes_file);
  std::vector<NodeRun> nodes(spec.nodes.size());
  char stamp[32];
  time_t now = time(nullptr);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime(&now));
  std::string base = o.out;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string run_id = base.substr(base.rfind('/') + 1) + "-" + stamp + "-" + std::to_string(getpid());
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].spec = spec.nodes[i];
    nodes[i].node_dir = spec.nodes[i].dir + "/" + run_id + "/" + spec.nodes[i].name;
    nodes[i].local = o.out + "/" + spec.nodes[i].name;
  }
  auto problems = check_nodes(nodes, own_version(), o.check_timeout_s);
  if (!problems.empty()) {
    for (const auto& p : problems) say("{}", p);
    throw std::runtime_error(
        fmt::format("{} of {} node(s) cannot start; nothing was started", problems.size(), nodes.size()));
  }
  if (mkdir(o.out.c_str(), 0755) != 0 && !(errno == EEXIST && o.overwrite))
    throw std::runtime_error(fmt::format("create {}: {}", o.out, strerror(errno)));
  for (NodeRun& n : nodes) open_copy(n, true, o.overwrite);
  // Rewritten as nodes start, stop or are lost: `top RUN` waits while any starts.
  auto write_live = [&] {
    write_file(o.out + "/cluster.json", manifest(run_id, o.path, nodes, -1, true).dump(2) + "\n");
  };
  write_live();

  const std::string key = minrtt::generate_key_text();
  StopSignals sig;  // Ctrl-C and SIGTERM stop the nodes in order instead of killing the controller
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < nodes.size(); ++i) {
    nlohmann::json req = {{"op", "record"},
                          {"node", nodes[i].spec.name},
                          {"dir", nodes[i].node_dir},
                          {"record_args", record_args(o, nodes, i)},
                          {"command", nodes[i].spec.command.empty() ? o.cmd : nodes[i].spec.command},
                          {"controller_timeout", o.controller_timeout_s}};
    if (nodes.size() > 1) req["key"] = key, req["hold"] = true;
    start_agent(nodes[i], req);
  }
  say("{} node(s) started (run {}), rounds with the reference {} and a neighbour each", nodes.size(), run_id,
      nodes[0].spec.name);
  double run_s = stream_run(nodes, o, sig, write_live);
  for (NodeRun& n : nodes) complete_copy(n);
  write_file(o.out + "/cluster.json", manifest(run_id, o.path, nodes, run_s).dump(2) + "\n");
  // Translated even with a node lost: the others' traces and the lost one's up to its break.
  int st = finish_run(o.out, o.path, nodes, run_s);
  write_file(o.out + "/cluster.json", manifest(run_id, o.path, nodes, run_s).dump(2) + "\n");  // with the gaps
  int bad = report_nodes(nodes, run_s);
  return bad || st ? 1 : 0;
}

int run_cluster_gather(const ClusterGatherOptions& o) {
  std::ifstream in(o.run + "/cluster.json");
  if (!in) throw std::runtime_error(fmt::format("{}: no cluster.json (not a cluster run)", o.run));
  nlohmann::json m = nlohmann::json::parse(in);
  std::vector<NodeRun> nodes;
  double run_s = -1;  // the record run's, as its manifest says
  nlohmann::json spec_json = {{"nodes", nlohmann::json::array()}};
  for (const auto& e : m["nodes"]) spec_json["nodes"].push_back(e);
  ClusterSpec spec = parse_nodes(spec_json);
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    NodeRun n;
    n.spec = spec.nodes[i];
    n.node_dir = m["nodes"][i].at("node_dir");
    n.local = o.run + "/" + n.spec.name;
    if (m["nodes"][i].value("state", std::string()) != "incomplete" && m["nodes"][i].contains("done")) {
      n.done = true;
      n.done_json = m["nodes"][i]["done"];
      std::ifstream mf(n.local + "/meta.json");
      n.meta.assign(std::istreambuf_iterator<char>(mf), {});
      n.received = m["nodes"][i].value("events_bytes", uint64_t(0));
      const nlohmann::json gap = m["nodes"][i].value("gap", nlohmann::json::object());
      n.done_at_s = gap.value("seen_at_s", -1.0);
      run_s = std::max(run_s, gap.value("run_s", -1.0));
    } else {
      open_copy(n, false, false);
      say("gather: node {}: fetching from byte {}", n.spec.name, n.received);
      run_fetch(n);
      complete_copy(n);
    }
    nodes.push_back(std::move(n));
  }
  int st = o.translate ? finish_run(o.run, m.value("path", std::string()), nodes, run_s) : 0;
  write_file(o.run + "/cluster.json",
             manifest(m.value("run_id", std::string()), m.value("path", ""), nodes, run_s).dump(2) + "\n");
  int bad = report_nodes(nodes, run_s);
  return bad || st ? 1 : 0;
}

}  // namespace cptrace
