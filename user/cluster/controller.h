// `cptrace cluster record` and `cptrace cluster gather`: the controller of a
// cluster run (docs/cluster.md).
//
// record: checks every node (its cptrace runs through the transport and has our
// version), generates the MinRTT key, starts `cptrace cluster agent` on each
// node through its transport with the key on its stdin, and writes each node's
// stream into RUN/NODE/ (events.cpt as it grows, meta.json at the end). Ctrl-C,
// --duration, or the end of every workload stops all nodes; whatever a broken
// stream missed is fetched again from the agent by offset, or the node is
// reported incomplete by name. Then the run is translated onto the first node's
// TSC (RUN/translated, the code of `cptrace translate`), the per-hop summary of
// --path printed and RUN/report.html written. RUN/cluster.json is the manifest
// `gather` reads later.
#pragma once
#include <string>
#include <vector>

namespace cptrace {

struct ClusterRecordOptions {
  std::string nodes_file;
  std::string out;  // RUN
  bool overwrite = false;
  double duration_s = 0;  // 0: until Ctrl-C or the workloads' end
  std::string path;  // "CH,CH,...": the per-hop summary and the report's path
  double controller_timeout_s = 30;  // agents stop their recorder after this long without us
  double check_timeout_s = 30;  // for reaching each node at the start
  double stop_linger_s = 3;  // every responder answers this long after its node's stop phase
  std::vector<std::string> record_args;  // the same for every node (-p, --lib, --all, --net, ...)
  std::vector<std::string> cmd;  // the workload of nodes that have none of their own
};

struct ClusterGatherOptions {
  std::string run;
  bool translate = true;
};

int run_cluster_record(const ClusterRecordOptions& o);
int run_cluster_gather(const ClusterGatherOptions& o);

}  // namespace cptrace
