#include "cluster/controller.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "analyze/report_html.h"
#include "analyze/report_path.h"
#include "cluster/agent_wire.h"
#include "cluster/node_process.h"
#include "cluster/nodes_file.h"
#include "sync/minrtt_protocol.h"
#include "trace/clock_map.h"
#include "trace/output_dir.h"
#include "trace/trace_reader.h"
#include "translate/clock_relation.h"
#include "translate/translate.h"
#include "translate/translated_frame.h"

namespace cptrace {

namespace {

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

std::atomic<int> g_signal{0};
int g_wake = -1;  // self-pipe: the signal handler wakes the poll loop
void on_signal(int sig) {
  g_signal = sig;
  char c = 0;
  if (write(g_wake, &c, 1) < 0) {
  }
}

void write_file(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("create {}: {}", tmp, strerror(errno)));
  bool ok = write_all(fd, content.data(), content.size()) && fsync(fd) == 0;
  if (close(fd) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(fmt::format("write {}: {}", path, strerror(errno)));
}

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

// Applies one frame of a node's stream to its copy.
void apply_frame(NodeRun& n, const WireFrame& f) {
  switch (f.type) {
    case WireType::Hello:
      n.hello = true;
      n.follow_hello = n.following;
      break;
    case WireType::Events: {
      uint64_t end = f.offset + f.data.size();
      if (f.offset > n.received) {
        n.problem = fmt::format("stream skipped bytes {}..{} of events.cpt", n.received, f.offset);
        return;
      }
      if (end <= n.received) return;  // already have it (a fetch overlapping the stream)
      size_t skip = size_t(n.received - f.offset);
      if (pwrite(n.events_fd, f.data.data() + skip, f.data.size() - skip, off_t(n.received)) !=
          ssize_t(f.data.size() - skip))
        throw std::runtime_error(fmt::format("write {}/events.cpt: {}", n.local, strerror(errno)));
      n.received = end;
      break;
    }
    case WireType::Meta:
      n.meta = f.data;
      break;
    case WireType::MetaStart:  // for `top RUN` while recording; the final one replaces it
      if (n.meta.empty()) write_file(n.local + "/meta.json", f.data);
      break;
    case WireType::Stopped:
      n.stopped = true;
      break;
    case WireType::Done:
      n.done = true;
      n.done_json = nlohmann::json::parse(f.data);
      break;
  }
}

// Reads what the node's agent sent; false at the end of its stream.
bool read_stream(NodeRun& n) {
  char buf[1 << 16];
  ssize_t r = read(n.proc.out, buf, sizeof buf);
  if (r < 0 && errno == EINTR) return true;
  if (r <= 0) return false;
  n.dec.feed(buf, size_t(r));
  WireFrame f;
  try {
    while (n.dec.next(f)) apply_frame(n, f);
  } catch (const std::runtime_error& e) {
    n.problem = e.what();
    return false;
  }
  return true;
}

void read_err(NodeRun& n) {
  char buf[4096];
  ssize_t r = read(n.proc.err, buf, sizeof buf);
  if (r > 0) {
    n.transport_err.append(buf, size_t(r));
    if (n.transport_err.size() > 16384) n.transport_err.erase(0, n.transport_err.size() - 8192);
  } else if (r == 0 || errno != EINTR) {
    close(n.proc.err);
    n.proc.err = -1;
  }
}

void start_agent(NodeRun& n, const nlohmann::json& request) {
  n.proc = spawn_node_process(remote_argv(n.spec, {"cluster", "agent"}));
  n.running = true;
  n.following = request.value("op", std::string()) == "follow";
  n.follow_hello = false;
  std::string line = request.dump() + "\n";  // the key goes here: stdin, never argv
  write_all(n.proc.in, line.data(), line.size());
}

void finish_agent(NodeRun& n) {
  if (n.proc.in >= 0) close(n.proc.in);
  if (n.proc.out >= 0) close(n.proc.out);
  while (n.proc.err >= 0) read_err(n);
  int st;
  while (waitpid(n.proc.pid, &st, 0) < 0 && errno == EINTR) {
  }
  n.proc = {};
  n.running = false;
}

// Runs one agent (a fetch) to its end.
void run_fetch(NodeRun& n) {
  // The run is over: a recorder left without its agent is stopped now.
  start_agent(n, {{"op", "fetch"}, {"dir", n.node_dir}, {"offset", n.received}, {"stop", true}, {"wait", 60}});
  close(n.proc.in);
  n.proc.in = -1;
  n.dec = WireDecoder();
  n.problem.clear();
  for (;;) {
    pollfd p[2] = {{n.proc.out, POLLIN, 0}, {n.proc.err, POLLIN, 0}};
    if (poll(p, 2, 120000) <= 0) break;
    if (p[1].revents) read_err(n);
    if (p[0].revents && !read_stream(n)) break;
  }
  finish_agent(n);
}

void open_copy(NodeRun& n, bool fresh, bool overwrite) {
  if (fresh) {
    OutputDir d(n.local, kTraceOutput, overwrite);
    n.events_fd = d.create("events.cpt");
  } else {
    n.events_fd = open((n.local + "/events.cpt").c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (n.events_fd < 0) throw std::runtime_error(fmt::format("open {}/events.cpt: {}", n.local, strerror(errno)));
    struct stat st;
    fstat(n.events_fd, &st);
    n.received = uint64_t(st.st_size);
  }
}

// After the stream: a node whose copy is short is asked again from where it
// broke; what is still missing is said by name.
void complete_copy(NodeRun& n) {
  // A stream that reached its Done whole needs nothing more, even from a failed recorder.
  bool whole = n.done && !n.done_json.value("running", false) &&
               n.received == n.done_json.value("events_bytes", uint64_t(0)) && n.problem.empty();
  if (!whole && (n.hello || n.received > 0 || n.done)) {
    fmt::print(stderr, "cluster: node {}: stream ended at byte {}{}; fetching the rest\n", n.spec.name, n.received,
               n.problem.empty() ? "" : " (" + n.problem + ")");
    run_fetch(n);
    n.resumed = n.resumed || n.broke_at_s >= 0;
  }
  if (!n.meta.empty()) write_file(n.local + "/meta.json", n.meta);
  if (n.events_fd >= 0 && n.complete()) ftruncate(n.events_fd, off_t(n.received));
  if (n.events_fd >= 0) close(n.events_fd), n.events_fd = -1;
}

// The recorder exits with its command's status; a command it passed our stop
// (SIGINT) to ends with 130, which is no failure.
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

nlohmann::json manifest(const std::string& run_id, const std::string& path, const std::vector<NodeRun>& nodes,
                        double run_s = -1) {
  nlohmann::json m = {{"run_id", run_id}, {"path", path}, {"nodes", nlohmann::json::array()}};
  for (const NodeRun& n : nodes) {
    nlohmann::json e = to_json(n.spec);
    e["node_dir"] = n.node_dir;
    e["state"] = state_of(n);
    e["events_bytes"] = n.received;
    if (n.done) e["done"] = n.done_json;
    if (n.broke_at_s >= 0)
      e["stream"] = {{"broke_at_s", n.broke_at_s}, {"broke_at_byte", n.broke_at_byte}, {"breaks", n.breaks},
                     {"resumed", n.resumed},       {"resumed_at_s", n.resumed_at_s},   {"gap", !n.complete()}};
    if (n.killed()) {
      e["gap"] = {{"signal", n.done_json.value("signal", 0)}, {"seen_at_s", n.done_at_s}, {"run_s", run_s}};
      if (n.trace_end.is_object()) e["gap"].update(n.trace_end);
    }
    m["nodes"].push_back(e);
  }
  return m;
}

std::string seconds(double s) { return s < 0 ? "?" : fmt::format("{:.1f}", s); }

// What a lost recorder's gap is: when it died and where its events end, on
// the reference's clock when the run was translated, else as the controller saw it.
std::string gap_line(const NodeRun& n, double run_s) {
  const nlohmann::json& e = n.trace_end;
  std::string seen = fmt::format("at +{} s of the {} s run", seconds(n.done_at_s), seconds(run_s));
  std::string l = fmt::format("node {}: recorder killed by signal {} ", n.spec.name, n.done_json.value("signal", 0));
  if (e.contains("killed_s"))
    l += fmt::format("between +{:.3f} and +{:.3f} s", e["killed_s"][0].get<double>(), e["killed_s"][1].get<double>());
  else
    l += seen + " (the controller's clock)";
  if (!e.contains("trace_ends_s"))
    return l + fmt::format("; its trace ends at its last complete frame (byte {}): the events after it are missing{}",
                           n.received, e.contains("killed_s") ? " (" + e.value("clock", std::string()) + ")" : "");
  return l + fmt::format(
                 "; its trace ends at its last complete frame: events on {} after +{:.3f} s (+-{:.3f} ms) are "
                 "missing ({}; the controller saw the loss {})",
                 n.spec.name, e.value("trace_ends_s", 0.0), e.value("trace_ends_err_s", 0.0) * 1e3,
                 e.value("clock", std::string()), seen);
}

// What happened to each node that is not simply complete, by name: problems
// (`bad` counts those nodes) and the streams that broke and were resumed whole.
std::vector<std::string> node_lines(const std::vector<NodeRun>& nodes, double run_s, int* bad = nullptr) {
  std::vector<std::string> lines;
  int count = 0;
  for (const NodeRun& n : nodes) {
    std::string s = state_of(n);
    if (s == "complete") {
      if (n.resumed)
        lines.push_back(
            fmt::format("node {}: its stream broke at +{} s (byte {}); resumed from there {}: complete, no gap",
                        n.spec.name, seconds(n.broke_at_s), n.broke_at_byte,
                        n.resumed_at_s >= 0 ? "at +" + seconds(n.resumed_at_s) + " s" : "at the stop"));
      continue;
    }
    count++;
    if (s == "recorder_killed")
      lines.push_back(gap_line(n, run_s));
    else if (s == "recorder_failed")
      lines.push_back(fmt::format("node {}: recorder failed (exit {}: its own error, or its command's status):\n{}",
                                  n.spec.name, n.done_json.value("status", -1),
                                  n.done_json.value("stderr_tail", std::string())));
    else if (n.done && n.done_json.value("running", false))
      lines.push_back(
          fmt::format("node {}: trace incomplete: its recorder still runs (got {} bytes)", n.spec.name, n.received));
    else
      lines.push_back(fmt::format("node {}: trace incomplete: got {} bytes of events.cpt{}{}", n.spec.name, n.received,
                                  n.problem.empty() ? "" : ", " + n.problem,
                                  n.transport_err.empty() ? "" : "; transport: " + tail_lines(n.transport_err, 3)));
  }
  if (bad) *bad = count;
  return lines;
}

// Says what happened to each node, by name; the number of nodes with a problem.
int report_nodes(const std::vector<NodeRun>& nodes, double run_s) {
  int bad = 0;
  for (const std::string& l : node_lines(nodes, run_s, &bad)) fmt::print(stderr, "cluster: {}\n", l);
  return bad;
}

// Where each lost recorder's events end, on the reference's clock (seconds
// since the reference's recording began), from the translated run: the
// node's last event kept, with its strict bound.
void locate_trace_ends(const std::string& translated, std::vector<NodeRun>& nodes) {
  std::map<std::string, NodeRun*> lost;
  for (NodeRun& n : nodes)
    if (n.killed()) lost[n.spec.name] = &n;
  if (lost.empty()) return;
  TraceReader t(translated);
  std::map<uint16_t, NodeRun*> by_index;
  std::map<NodeRun*, RelationPtr> to_ref;
  const auto tn = t.meta()["translated"].value("nodes", nlohmann::json::array());
  for (size_t i = 0; i < tn.size(); ++i)
    if (auto it = lost.find(tn[i].value("node", std::string())); it != lost.end()) {
      by_index[uint16_t(i)] = it->second;
      if (tn[i].contains("to_reference")) to_ref[it->second] = relation_from_json(tn[i]["to_reference"]);
    }
  std::map<NodeRun*, TranslatedEvent> last;
  std::vector<TranslatedEvent> evs;
  t.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs)
      if (auto it = by_index.find(e.node); it != by_index.end()) {
        auto [at, fresh] = last.try_emplace(it->second, e);
        if (!fresh && e.local_ts > at->second.local_ts) at->second = e;
      }
  });
  TraceReader ref(nodes[0].local);
  double hz = ref.clock_map().tsc_hz();
  int64_t start = ref.meta()["start"].value("tsc", int64_t(0));
  if (!(hz > 0)) return;
  auto clock = fmt::format("times on {}'s clock, seconds since its recording began", nodes[0].spec.name);
  for (auto& [n, e] : last)
    n->trace_end = {{"trace_ends_s", double(e.ref_ts - start) / hz},
                    {"trace_ends_err_s", double(std::max(e.ref_hi - e.ref_ts, e.ref_ts - e.ref_lo)) / hz},
                    {"clock", clock}};
  for (auto& [n, rel] : to_ref) {
    if (!n->done_json.contains("ended_mono_ns")) continue;
    try {  // the node's clock stream and relation may not reach that far: then not said
      ClockMap cm = TraceReader(n->local).clock_map();
      const auto& m = n->done_json["ended_mono_ns"];
      Bound lo = rel->at(int64_t(cm.mono_to_tsc_bounds(m[0].get<uint64_t>()).lo)),
            hi = rel->at(int64_t(cm.mono_to_tsc_bounds(m[1].get<uint64_t>()).hi));
      n->trace_end["killed_s"] = {double(lo.lo - start) / hz, double(hi.hi - start) / hz};
      n->trace_end["clock"] = clock;
    } catch (const std::exception&) {
    }
  }
}

void print_path_summary(const std::string& translated, const std::string& path) {
  TraceReader r(translated);
  nlohmann::json b = path_breakdown(r, path);
  auto row = [](const std::string& label, const nlohmann::json& h) {
    const nlohmann::json& g = h.contains("all") ? h["all"] : h;
    std::string unit = h.value("unit", std::string("ns"));
    std::string line = fmt::format("  {:<28} n={:<7}", label, g.value("count", uint64_t(0)));
    for (const char* p : {"p50", "p90", "p99"})
      if (g.contains(p))
        line += fmt::format(" {} {} [{}, {}]", p, g[p].dump(), g.value(std::string(p) + "_lo", nlohmann::json()).dump(),
                            g.value(std::string(p) + "_hi", nlohmann::json()).dump());
    fmt::print("{} {}\n", line, unit);
  };
  fmt::print("per-hop latency (true percentile within [lo, hi]):\n");
  for (const auto& h : b["hops"]) row(h.value("from", std::string()) + " -> " + h.value("to", std::string()), h);
  if (b.contains("end_to_end")) row("end to end", b["end_to_end"]);
}

// translate (the code path of `cptrace translate`), the summary and the report.
int finish_run(const std::string& run, const std::string& path, std::vector<NodeRun>& nodes, double run_s) {
  TranslateOptions t;
  for (const NodeRun& n : nodes)
    if (n.complete() || (!n.meta.empty() && n.received > 0)) t.dirs.push_back(n.local);
  if (t.dirs.empty() || nodes.empty() || !nodes[0].complete()) {
    fmt::print(stderr, "cluster: the reference node {} has no complete trace: not translated\n",
               nodes.empty() ? "?" : nodes[0].spec.name);
    return 1;
  }
  t.reference = nodes[0].spec.name;
  t.out = run + "/translated";
  t.overwrite = true;
  int st = cmd_translate(t);
  fflush(stdout);  // its lines before the report's (stderr)
  if (st != 0) return st;
  locate_trace_ends(t.out, nodes);
  if (!path.empty()) {
    print_path_summary(t.out, path);
    ReportOptions ro;
    ro.dir = t.out;
    ro.out = run + "/report.html";
    ro.node_dirs = t.dirs;
    ro.path = path;
    ro.warnings = node_lines(nodes, run_s);
    st = run_report(ro);
    fmt::print("report: {}\n", ro.out);
  }
  fmt::print("translated run: {}\n", t.out);
  return st;
}

struct SignalScope {
  int pipe_fds[2];
  struct sigaction old_int, old_term;
  SignalScope() {
    if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe");
    g_wake = pipe_fds[1];
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    close(pipe_fds[0]), close(pipe_fds[1]);
    g_wake = -1;
  }
};

// The poll loop over every agent's stream until all have ended; the run's
// length in seconds (until the stop, or until the last stream ended).
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

}  // namespace

int cmd_cluster_record(const ClusterRecordOptions& o) {
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
    for (const auto& p : problems) fmt::print(stderr, "cluster: {}\n", p);
    throw std::runtime_error(
        fmt::format("{} of {} node(s) cannot start; nothing was started", problems.size(), nodes.size()));
  }
  if (mkdir(o.out.c_str(), 0755) != 0 && !(errno == EEXIST && o.overwrite))
    throw std::runtime_error(fmt::format("create {}: {}", o.out, strerror(errno)));
  for (NodeRun& n : nodes) open_copy(n, true, o.overwrite);
  write_file(o.out + "/cluster.json", manifest(run_id, o.path, nodes).dump(2) + "\n");

  const std::string key = minrtt::generate_key_text();
  SignalScope sig;
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
  fmt::print(stderr, "cluster: {} node(s) started (run {}), rounds with the reference {} and a neighbour each\n",
             nodes.size(), run_id, nodes[0].spec.name);
  double run_s = stream_run(nodes, o, sig.pipe_fds[0]);
  for (NodeRun& n : nodes) complete_copy(n);
  write_file(o.out + "/cluster.json", manifest(run_id, o.path, nodes, run_s).dump(2) + "\n");
  // Translated even with a node lost: the others' traces and the lost one's up to its break.
  int st = finish_run(o.out, o.path, nodes, run_s);
  write_file(o.out + "/cluster.json", manifest(run_id, o.path, nodes, run_s).dump(2) + "\n");  // with the gaps
  int bad = report_nodes(nodes, run_s);
  return bad || st ? 1 : 0;
}

int cmd_cluster_gather(const ClusterGatherOptions& o) {
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
      fmt::print(stderr, "cluster gather: node {}: fetching from byte {}\n", n.spec.name, n.received);
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
