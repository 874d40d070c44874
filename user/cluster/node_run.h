// One node's side of a cluster run, as the controller sees it: its agent
// process, its stream's decoder and copy, and what became of it. Shared by
// every stage of the controller (start, stream, complete, manifest, finish).
#pragma once
#include <stdint.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/agent_wire.h"
#include "cluster/node_process.h"
#include "cluster/nodes_file.h"

namespace cptrace::cluster {

using Clock = std::chrono::steady_clock;

// One node's side of the run, as the controller sees it.
struct NodeRun {
  ClusterNode spec;
  std::string node_dir;  // its own copy, on the node
  std::string local;  // RUN/NODE
  NodeProcess proc;
  bool running = false, hello = false, done = false;
  bool stopped = false;  // its MinRTT stop phase is over, its responder held
  WireDecoder dec;
  int events_fd = -1;
  uint64_t received = 0;
  std::string meta, transport_err, problem;
  nlohmann::json done_json;
  // Seconds into the run (the controller's clock since the agents were started).
  double broke_at_s = -1, done_at_s = -1, resumed_at_s = -1;  // the first break, the first resume
  uint64_t broke_at_byte = 0;
  bool resumed = false;  // streamed again (a follow agent, or a fetch at the stop) from where it broke
  bool following = false, follow_hello = false;  // the current agent is a follow agent; it answered
  int breaks = 0;
  Clock::time_point retry_at;
  nlohmann::json trace_end;  // a lost recorder: where its events end on the reference's clock

  // The recorder itself died of a signal (SIGKILL, a crash): no stop sequence,
  // its trace ends at its last complete frame.
  bool killed() const { return done && done_json.contains("signal"); }

  bool complete() const {
    return done && !done_json.value("running", false) && problem.empty() && !meta.empty() &&
           received == done_json.value("events_bytes", uint64_t(0));
  }
};

// The recorder exits with its command's status; a command it passed our stop
// (SIGINT) to ends with 130, which is no failure.
bool recorder_ok(const nlohmann::json& done);

// "complete", "recorder_failed", "recorder_killed" or "incomplete" (cluster.json's state).
std::string state_of(const NodeRun& n);
// cluster.json's state while the nodes record, for `top RUN`: "starting" (no
// byte of its trace yet: a cluster of many nodes takes seconds to start),
// "recording", "lost" (its stream broke and is not taken up again yet),
// "stopped" (its recorder ended), or "recorder_failed" / "recorder_killed".
std::string live_state_of(const NodeRun& n);

}  // namespace cptrace::cluster
