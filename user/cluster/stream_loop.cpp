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
#include "os/say.h"

namespace cptrace::cluster {

namespace {

// The loop's state besides the nodes: when it started, whether the stop went
// out (and when), whether the held responders were released.
class StreamLoop {
 public:
  StreamLoop(std::vector<NodeRun>& nodes, const ClusterRecordOptions& o) : nodes_(nodes), o_(o) {
    any_workload_ = !o.cmd.empty();
    for (const NodeRun& n : nodes) any_workload_ = any_workload_ || !n.spec.command.empty();
  }

  double run(const StopSignals& signals, const std::function<void()>& states_changed) {
    std::string said = states();
    while (poll_streams(signals.wake_fd())) {
      follow_broken();
      check_stop(signals.signal());
      release_when_all_stopped();
      if (std::string now = states(); now != said) said = now, states_changed();
    }
    return stopped_at_ >= 0 ? stopped_at_ : elapsed();
  }

 private:
  std::string states() const {
    std::string s;
    for (const NodeRun& n : nodes_) s += live_state_of(n) + ",";
    return s;
  }

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void stop_all(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    stopped_at_ = elapsed();
    say("stopping every node ({})", why);
    for (NodeRun& n : nodes_)
      if (n.proc.in >= 0) write_all(n.proc.in, "stop\n", 5);
  }

  // One poll over every running agent's stdout and stderr, and what came read;
  // false once no agent runs and no broken stream is to be taken up again.
  bool poll_streams(int wake_fd) {
    // The wake fd stays readable after a signal: once the stop went out it
    // would only turn the poll into a busy loop.
    std::vector<pollfd> fds = {{stopping_ ? -1 : wake_fd, POLLIN, 0}};
    std::vector<std::pair<size_t, bool>> who = {{0, false}};
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i].running) continue;
      if (nodes_[i].proc.out >= 0) fds.push_back({nodes_[i].proc.out, POLLIN, 0}), who.push_back({i, true});
      if (nodes_[i].proc.err >= 0) fds.push_back({nodes_[i].proc.err, POLLIN, 0}), who.push_back({i, false});
    }
    bool awaiting = false;  // a broken stream to take up again
    for (const NodeRun& n : nodes_) awaiting = awaiting || (!stopping_ && !n.running && !n.done && n.broke_at_s >= 0);
    if (fds.size() == 1 && !awaiting) return false;
    poll(fds.data(), fds.size(), 200);
    for (size_t k = 1; k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      NodeRun& n = nodes_[who[k].first];
      if (!who[k].second)
        read_err(n);
      else if (!read_stream(n))
        stream_ended(n);
      if (n.follow_hello && n.resumed_at_s < 0) {
        n.resumed = true, n.resumed_at_s = elapsed();
        say("node {}: stream resumed at +{:.1f} s from byte {}", n.spec.name, n.resumed_at_s, n.received);
      }
      if (n.done && n.done_at_s < 0) done_seen(n);
    }
    return true;
  }

  // A node's Done arrived. A recorder that died of a signal mid-run is said at
  // once, as a broken stream is: the user sees the loss while the others record.
  void done_seen(NodeRun& n) {
    n.done_at_s = elapsed();
    if (n.killed() && !stopping_)
      say("node {}: recorder killed by signal {} (seen at +{:.1f} s); the others record on", n.spec.name,
          n.done_json.value("signal", 0), n.done_at_s);
  }

  // An agent's stream is over: before its Done, it broke.
  void stream_ended(NodeRun& n) {
    close(n.proc.out);
    n.proc.out = -1;
    bool answered = !n.following || n.follow_hello;
    finish_agent(n);
    if (n.done) return;
    if (n.broke_at_s < 0) n.broke_at_s = elapsed(), n.broke_at_byte = n.received;
    if (answered) say("node {}: its stream broke at +{:.1f} s (byte {})", n.spec.name, elapsed(), n.received);
    n.breaks += answered;
    // Reached again soon, then less often while it does not answer.
    n.retry_at = Clock::now() + std::chrono::seconds(answered ? 1 : 3);
  }

  // A broken stream is taken up again while its recorder runs: a follow agent
  // from the byte where the copy ends (its recorder's agent, left without us,
  // then does not stop it after --controller-timeout).
  void follow_broken() {
    for (NodeRun& n : nodes_)
      if (!stopping_ && !n.running && !n.done && n.broke_at_s >= 0 && Clock::now() >= n.retry_at) {
        n.dec = WireDecoder();
        n.problem.clear();
        start_agent(n, {{"op", "follow"}, {"dir", n.node_dir}, {"offset", n.received}});
        if (released_ && n.proc.in >= 0) write_all(n.proc.in, "release\n", 8);  // it missed the first
      }
  }

  // Ctrl-C, --duration, a recorder that could not start, or every workload's end.
  void check_stop(int signal) {
    if (signal) stop_all(strsignal(signal));
    if (o_.duration_s > 0 && Clock::now() - start_ > std::chrono::duration<double>(o_.duration_s))
      stop_all("--duration");
    for (const NodeRun& n : nodes_)  // a recorder that failed before writing a trace could not start
      if (n.done && n.done_json.value("events_bytes", uint64_t(1)) == 0 && !recorder_ok(n.done_json))
        stop_all(fmt::format("node {} could not start its recorder", n.spec.name));
    bool workloads_over = any_workload_;
    for (const NodeRun& n : nodes_)
      if (!n.spec.command.empty() || !o_.cmd.empty())  // a node not reached again does not hold the others
        workloads_over = workloads_over && (n.done || !n.running || (n.following && !n.follow_hello));
    if (workloads_over) stop_all("every workload has exited");
  }

  // Responders are held until no node has stop rounds left to do: workloads
  // end at different times, and a neighbour gone early would cost a node its
  // stop rounds (and --sync-wait seconds of retries).
  void release_when_all_stopped() {
    bool all_stopped = !released_;
    for (const NodeRun& n : nodes_)
      all_stopped = all_stopped && (n.stopped || n.done || !n.running || (n.following && !n.follow_hello));
    if (!all_stopped) return;
    released_ = true;
    for (NodeRun& n : nodes_)
      if (n.proc.in >= 0) write_all(n.proc.in, "release\n", 8);
  }

  std::vector<NodeRun>& nodes_;
  const ClusterRecordOptions& o_;
  const Clock::time_point start_ = Clock::now();
  double stopped_at_ = -1;
  bool stopping_ = false, released_ = false, any_workload_ = false;
};

}  // namespace

double stream_run(std::vector<NodeRun>& nodes, const ClusterRecordOptions& o, const StopSignals& signals,
                  const std::function<void()>& states_changed) {
  return StreamLoop(nodes, o).run(signals, states_changed);
}

}  // namespace cptrace::cluster
