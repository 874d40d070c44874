#include "cluster/node_check.h"

#include <thread>

#include <fmt/core.h>

namespace cptrace::cluster {

std::string own_version() {
  CaptureResult r = run_capture({"/proc/self/exe", "--version"}, 10);
  return tail_lines(r.out, 1);
}

// Every node runs its cptrace through its transport and prints our version;
// the problems, each naming its node.
std::vector<std::string> check_nodes(const std::vector<NodeRun>& nodes, const std::string& version, double timeout) {
  std::vector<std::string> problems(nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i)
    threads.emplace_back([&, i] {
      const ClusterNode& n = nodes[i].spec;
      auto argv = remote_argv(n, {"--version"});
      CaptureResult r = run_capture(argv, timeout);
      std::string theirs = tail_lines(r.out, 1);
      if (r.status == -1)
        problems[i] =
            fmt::format("node {}: unreachable: `{}` did not answer within {} s", n.name, join_argv(argv), timeout);
      else if (r.status != 0 || theirs.rfind("cptrace ", 0) != 0)
        problems[i] = fmt::format("node {}: unreachable or no cptrace at \"{}\" (`{}` exit {}): {}", n.name, n.cptrace,
                                  join_argv(argv), r.status, tail_lines(r.err + r.out, 3));
      else if (theirs != version)
        problems[i] = fmt::format("node {}: version mismatch: the controller is \"{}\", the node's {} is \"{}\"",
                                  n.name, version, n.cptrace, theirs);
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> out;
  for (auto& p : problems)
    if (!p.empty()) out.push_back(p);
  return out;
}

}  // namespace cptrace::cluster
