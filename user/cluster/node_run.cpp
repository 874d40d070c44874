#include "cluster/node_run.h"

#include <signal.h>

namespace cptrace::cluster {

bool recorder_ok(const nlohmann::json& done) {
  int st = done.value("status", -1);
  return st == 0 || (st == 128 + SIGINT && done.value("stopped_by", std::string("recorder")) != "recorder");
}

std::string state_of(const NodeRun& n) {
  if (n.killed()) return "recorder_killed";
  if (n.done && !n.done_json.value("running", false) && !recorder_ok(n.done_json)) return "recorder_failed";
  if (n.complete()) return recorder_ok(n.done_json) ? "complete" : "recorder_failed";
  return "incomplete";
}

std::string live_state_of(const NodeRun& n) {
  if (n.done) {
    std::string s = state_of(n);
    return s == "recorder_failed" || s == "recorder_killed" ? s : "stopped";
  }
  if (n.broke_at_s >= 0 && !(n.running && (!n.following || n.follow_hello))) return "lost";
  return n.received == 0 ? "starting" : "recording";
}

}  // namespace cptrace::cluster
