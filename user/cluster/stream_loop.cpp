#include "cluster/stream_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/core.h>

#include "cluster/node_copy.h"

namespace cptrace::cluster {

namespace {

std::atomic<int> g_signal{0};
int g_wake = -1;  // self-pipe: the signal handler wakes the poll loop
void on_signal(int sig) {
  g_signal = sig;
  char c = 0;
  if (write(g_wake, &c, 1) < 0) {
  }
}

}  // namespace

SignalScope::SignalScope() {
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe");
  g_wake = pipe_fds[1];
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
}
SignalScope::~SignalScope() {
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  close(pipe_fds[0]), close(pipe_fds[1]);
  g_wake = -1;
}

double stream_run(std::vector<NodeRun>& nodes, const ClusterRecordOptions& o, int wake_fd) {
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  double stopped_at = -1;
  bool stopping = false, released = false;
  bool any_workload = !o.cmd.empty();
  for (const NodeRun& n : nodes) any_workload = any_workload || !n.spec.command.empty();
  auto stop_all = [&](const std::string& why) {
    if (stopping) return;
    stopping = true;
    stopped_at = elapsed();
    fmt::print(stderr, "cluster: stopping every node ({})\n", why);
    for (NodeRun& n : nodes)
      if (n.proc.in >= 0) write_all(n.proc.in, "stop\n", 5);
  };
  for (;;) {
    std::vector<pollfd> fds = {{wake_fd, POLLIN, 0}};
    std::vector<std::pair<size_t, bool>> who = {{0, false}};
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i].running) continue;
      if (nodes[i].proc.out >= 0) fds.push_back({nodes[i].proc.out, POLLIN, 0}), who.push_back({i, true});
      if (nodes[i].proc.err >= 0) fds.push_back({nodes[i].proc.err, POLLIN, 0}), who.push_back({i, false});
    }
    bool awaiting = false;  // a broken stream to take up again
    for (const NodeRun& n : nodes) awaiting = awaiting || (!stopping && !n.running && !n.done && n.broke_at_s >= 0);
    if (fds.size() == 1 && !awaiting) break;
    poll(fds.data(), fds.size(), 200);
    for (size_t k = 1; k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      NodeRun& n = nodes[who[k].first];
      if (!who[k].second) {
        read_err(n);
      } else if (!read_stream(n)) {
        close(n.proc.out);
        n.proc.out = -1;
        bool answered = !n.following || n.follow_hello;
        finish_agent(n);
        if (!n.done) {
          if (n.broke_at_s < 0) n.broke_at_s = elapsed(), n.broke_at_byte = n.received;
          if (answered)
            fmt::print(stderr, "cluster: node {}: its stream broke at +{:.1f} s (byte {})\n", n.spec.name, elapsed(),
                       n.received);
          n.breaks += answered;
          // Reached again soon, then less often while it does not answer.
          n.retry_at = Clock::now() + std::chrono::seconds(answered ? 1 : 3);
        }
      }
      if (n.follow_hello && n.resumed_at_s < 0) {
        n.resumed = true, n.resumed_at_s = elapsed();
        fmt::print(stderr, "cluster: node {}: stream resumed at +{:.1f} s from byte {}\n", n.spec.name, n.resumed_at_s,
                   n.received);
      }
      if (n.done && n.done_at_s < 0) n.done_at_s = elapsed();
    }
    // A broken stream is taken up again while its recorder runs: a follow agent
    // from the byte where the copy ends (its recorder's agent, left without us,
    // then does not stop it after --controller-timeout).
    for (NodeRun& n : nodes)
      if (!stopping && !n.running && !n.done && n.broke_at_s >= 0 && Clock::now() >= n.retry_at) {
        n.dec = WireDecoder();
        n.problem.clear();
        start_agent(n, {{"op", "follow"}, {"dir", n.node_dir}, {"offset", n.received}});
        if (released && n.proc.in >= 0) write_all(n.proc.in, "release\n", 8);  // it missed the first
      }
    if (g_signal) stop_all(strsignal(g_signal));
    if (o.duration_s > 0 && Clock::now() - start > std::chrono::duration<double>(o.duration_s)) stop_all("--duration");
    for (const NodeRun& n : nodes)  // a recorder that failed before writing a trace could not start
      if (n.done && n.done_json.value("events_bytes", uint64_t(1)) == 0 && !recorder_ok(n.done_json))
        stop_all(fmt::format("node {} could not start its recorder", n.spec.name));
    bool workloads_over = any_workload;
    for (const NodeRun& n : nodes)
      if (!n.spec.command.empty() || !o.cmd.empty())  // a node not reached again does not hold the others
        workloads_over = workloads_over && (n.done || !n.running || (n.following && !n.follow_hello));
    if (workloads_over) stop_all("every workload has exited");
    // Responders are held until no node has stop rounds left to do: workloads
    // end at different times, and a neighbour gone early would cost a node its
    // stop rounds (and --sync-wait seconds of retries).
    bool all_stopped = !released;
    for (const NodeRun& n : nodes)
      all_stopped = all_stopped && (n.stopped || n.done || !n.running || (n.following && !n.follow_hello));
    if (all_stopped) {
      released = true;
      for (NodeRun& n : nodes)
        if (n.proc.in >= 0) write_all(n.proc.in, "release\n", 8);
    }
  }
  return stopped_at >= 0 ? stopped_at : elapsed();
}

}  // namespace cptrace::cluster
