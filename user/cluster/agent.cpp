#include "cluster/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cluster/agent_wire.h"
#include "cluster/node_process.h"
#include "os/exec_argv.h"
#include "trace/json_text.h"
#include "trace/trace_format.h"
#include "clock/clock_now.h"

namespace cptrace {

namespace {

using Clock = std::chrono::steady_clock;

// The controller's end of stdout; once it is gone nothing more is sent, but the
// recording goes on (the node keeps its copy).
struct Out {
  bool open = true;
  void send(WireType t, uint64_t off, const std::string& data) {
    if (!open) return;
    std::string f = encode_wire(t, off, data.data(), data.size());
    open = write_all(1, f.data(), f.size());
  }
};

void mkdirs(const std::string& path) {
  for (size_t at = 1; at != std::string::npos;) {
    at = path.find('/', at + 1);
    std::string p = path.substr(0, at);
    if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error(fmt::format("mkdir {}: {}", p, strerror(errno)));
  }
}

void write_private(const std::string& path, const std::string& content) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("create {}: {}", path, strerror(errno)));
  bool ok = write_all(fd, content.data(), content.size());
  if (close(fd) != 0 || !ok) throw std::runtime_error(fmt::format("write {}: {}", path, strerror(errno)));
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, size_t(n));
}

// Where the complete frames of events.cpt end, from `from` (a frame boundary)
// on. While the recorder runs only whole frames are sent: a write that failed
// half-way is cut back by the writer and rewritten, and bytes already sent
// must never change.
uint64_t frames_end(int fd, uint64_t from, uint64_t size) {
  if (size < kFileHeaderSize) return 0;
  uint64_t at = std::max<uint64_t>(from, kFileHeaderSize);
  FrameHeader h;
  while (at + sizeof h <= size && pread(fd, &h, sizeof h, off_t(at)) == ssize_t(sizeof h) && h.magic == kFrameMagic &&
         at + sizeof h + h.payload_len <= size)
    at += sizeof h + h.payload_len;
  return at;
}

// Sends what events.cpt holds beyond `offset`: its complete frames, or with
// `to_end` (the recorder is gone, the file is final) every byte.
void pump(Out& out, const std::string& path, uint64_t& offset, bool to_end) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;  // not created yet
  struct stat st;
  uint64_t end = fstat(fd, &st) == 0 ? uint64_t(st.st_size) : 0;
  if (!to_end) end = frames_end(fd, offset, end);
  if (offset >= end) {  // the usual case, 5 times a second: no buffer to clear
    close(fd);
    return;
  }
  std::string buf(1 << 20, '\0');
  while (offset < end) {
    ssize_t n = pread(fd, buf.data(), std::min<uint64_t>(buf.size(), end - offset), off_t(offset));
    if (n <= 0) break;
    out.send(WireType::Events, offset, buf.substr(0, size_t(n)));
    offset += uint64_t(n);
  }
  close(fd);
}

// meta.json as the recorder writes it at its start, once it is there: the live
// view of the run (`top RUN`) takes the node's name and TSC skew from it long
// before the final one comes. True once sent.
bool send_start_meta(Out& out, const std::string& trace) {
  std::string meta = read_whole(trace + "/meta.json");  // replaced by rename: whole or absent
  if (meta.empty()) return false;
  out.send(WireType::MetaStart, 0, meta);
  return true;
}

// The controller's protocol is lines: the request (JSON), then commands
// ("stop", "release"). Takes the first whole line out of `pending`; false when
// it holds none yet.
bool take_line(std::string& pending, std::string& line) {
  auto nl = pending.find('\n');
  if (nl == std::string::npos) return false;
  line = pending.substr(0, nl);
  pending.erase(0, nl + 1);
  return true;
}

// The request line, read from `fd` until it is whole; what came after it stays
// in `pending`.
bool read_line(int fd, std::string& pending, std::string& line, bool& eof) {
  for (;;) {
    if (take_line(pending, line)) return true;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      return false;
    }
    pending.append(buf, size_t(n));
    if (pending.size() > (1 << 20)) throw std::runtime_error("request line too long");
  }
}

// A follow agent (the controller reached the node again after its stream broke)
// touches this file while it runs: the record agent, which lost its controller,
// then does not count that as the controller being gone.
const char* const kFollowerAlive = "/follower.alive";
// Written by the agent that stops a recorder it did not start (a follow or
// fetch agent), so that the recorder's own agent says it was stopped, not failed.
const char* const kStopRequested = "/stop.requested";

bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

void touch(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) futimens(fd, nullptr), close(fd);
}

void stop_recorder(const std::string& dir, pid_t pid) {
  touch(dir + kStopRequested);
  kill(pid, SIGINT);
}

// Touched within the last `s` seconds.
bool fresh(const std::string& path, double s) {
  struct stat st;
  timespec now;
  if (stat(path.c_str(), &st) != 0 || clock_gettime(CLOCK_REALTIME, &now) != 0) return false;
  return double(now.tv_sec - st.st_mtim.tv_sec) + 1e-9 * double(now.tv_nsec - st.st_mtim.tv_nsec) < s;
}

pid_t start_recorder(const std::vector<std::string>& argv, const std::string& log) {
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(fmt::format("create {}: {}", log, strerror(errno)));
  ExecArgv args(argv);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", strerror(errno)));
  if (pid == 0) {
    setsid();  // a hangup of the transport's session must not reach the recorder
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0), dup2(fd, 1), dup2(fd, 2);
    signal(SIGPIPE, SIG_DFL), signal(SIGHUP, SIG_DFL);
    args.exec_or_exit(false);
  }
  close(fd);
  return pid;
}

// A record agent's recorder: its files in DIR, and what the agent saw of it.
struct AgentRecording {
  std::string dir, node, key, trace, log, hold;
  pid_t pid = -1;
  bool holding = false, stopped_said = false;
  bool in_open = true, signalled = false;
  int wstatus = 0;
  int64_t alive_mono = 0, ended_mono = 0;  // the recorder ran after the first, had ended by the second
  uint64_t offset = 0;  // of events.cpt, sent

  explicit AgentRecording(const AgentRequest& req)
      : dir(req.dir),
        node(req.node),
        key(dir + "/minrtt.key"),
        trace(dir + "/trace"),
        log(dir + "/record.log"),
        hold(dir + "/sync.hold") {}
  // The held responder may stop answering.
  void release() {
    if (holding) unlink(hold.c_str()), holding = false;
  }
};

// `cptrace record` for this node, with the key and the hold file written
// where it reads them.
std::vector<std::string> recorder_argv(const AgentRequest& req, AgentRecording& r) {
  std::vector<std::string> argv = {self_exe(), "record", "--no-progress", "--node", r.node, "-o", r.trace};
  if (req.key) {
    write_private(r.key, *req.key + "\n");
    argv.insert(argv.end(), {"--key", r.key});
  }
  // The responder outlives this node's stop until the controller releases it:
  // neighbours whose workloads end later still get their stop rounds.
  r.holding = req.hold;
  if (r.holding) {
    unlink(r.hold.c_str());
    write_private(r.hold, "");
    argv.insert(argv.end(), {"--sync-hold", r.hold});
  }
  argv.insert(argv.end(), req.record_args.begin(), req.record_args.end());
  if (!req.command.empty()) {
    argv.push_back("--");
    argv.insert(argv.end(), req.command.begin(), req.command.end());
  }
  return argv;
}

// The controller's commands, as they come; at EOF (the controller gone) the
// clock of --controller-timeout starts.
void read_commands(AgentRecording& r, int in_fd, std::string& pending, Clock::time_point& eof_at) {
  pollfd p{r.in_open ? in_fd : -1, POLLIN, 0};
  poll(&p, 1, 200);
  if (!r.in_open || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return;
  bool eof = false;
  char buf[4096];
  ssize_t n = read(in_fd, buf, sizeof buf);
  if (n > 0) pending.append(buf, size_t(n));
  if (n == 0 || (n < 0 && errno != EINTR)) eof = true;
  for (std::string c; take_line(pending, c);) {
    if (c == "stop" && !r.signalled) kill(r.pid, SIGINT), r.signalled = true;
    if (c == "release") r.release();
  }
  if (eof) r.in_open = false, eof_at = Clock::now();
}

// Until the recorder ends: commands obeyed, the controller's absence timed,
// events.cpt streamed as it grows.
void watch_recorder(AgentRecording& r, int in_fd, std::string& pending, Out& out, double timeout_s) {
  bool meta_sent = false;
  Clock::time_point eof_at;
  r.alive_mono = mono_ns();
  for (;;) {
    read_commands(r, in_fd, pending, eof_at);
    if (!r.in_open && fresh(r.dir + kFollowerAlive, 2)) eof_at = Clock::now();  // the controller is back
    if (!r.in_open && Clock::now() - eof_at > std::chrono::duration<double>(timeout_s)) {
      if (!r.signalled) kill(r.pid, SIGINT);  // no controller: stop by ourselves, the trace stays here
      r.signalled = true;
      r.release();  // nobody else will
    }
    if (r.holding && !r.stopped_said && read_whole(r.hold).rfind("stopped", 0) == 0) {
      out.send(WireType::Stopped, 0, "{}");  // this node's stop rounds are over
      r.stopped_said = true;
    }
    pump(out, r.trace + "/events.cpt", r.offset, false);
    if (!meta_sent) meta_sent = send_start_meta(out, r.trace);
    int64_t before = mono_ns();
    pid_t w = waitpid(r.pid, &r.wstatus, WNOHANG);
    if (w == r.pid) {
      r.ended_mono = mono_ns();
      return;
    }
    r.alive_mono = before;
  }
}

// After the recorder: the rest of events.cpt, meta.json, and Done (also kept
// in DIR/status.json for a fetch).
void send_end(AgentRecording& r, Out& out) {
  pump(out, r.trace + "/events.cpt", r.offset, true);
  r.release();
  unlink(r.key.c_str());
  std::string meta = read_whole(r.trace + "/meta.json");
  if (!meta.empty()) out.send(WireType::Meta, 0, meta);
  const int st = r.wstatus;
  nlohmann::json done = {{"status", exit_status(st)},
                         {"events_bytes", r.offset},
                         {"stderr_tail", tail_lines(read_whole(r.log), 15)},
                         {"stopped_by", !r.signalled ? (exists(r.dir + kStopRequested) ? "controller" : "recorder")
                                        : r.in_open  ? "controller"
                                                     : "controller_timeout"}};
  // Killed (SIGKILL, a crash): the trace ends at its last complete frame, the
  // controller reports the gap. Not an exit status of 128 + N: that is the command's.
  // When, on this node's CLOCK_MONOTONIC: its trace's clock stream maps that
  // onto its TSC, translate's relation onto the reference's.
  if (WIFSIGNALED(st)) done["signal"] = WTERMSIG(st), done["ended_mono_ns"] = {r.alive_mono, r.ended_mono};
  std::ofstream(r.dir + "/status.json") << json_text(done) << "\n";
  out.send(WireType::Done, 0, json_text(done));
}

int run_record(const AgentRequest& req, int in_fd, std::string& pending, Out& out) {
  AgentRecording r(req);
  const double timeout_s = req.controller_timeout;
  mkdirs(r.dir);
  r.pid = start_recorder(recorder_argv(req, r), r.log);
  std::ofstream(r.dir + "/recorder.pid") << r.pid << "\n";  // for a fetch after this agent is gone
  out.send(WireType::Hello, 0, nlohmann::json{{"dir", r.dir}, {"pid", r.pid}}.dump());
  watch_recorder(r, in_fd, pending, out, timeout_s);
  send_end(r, out);
  return 0;
}

bool meta_complete(const std::string& trace) {
  try {
    return nlohmann::json::parse(read_whole(trace + "/meta.json")).value("complete", false);
  } catch (const nlohmann::json::exception&) {
    return false;  // not written yet
  }
}

// The pid of DIR's recorder while it runs (not a reused pid), else -1.
pid_t running_recorder(const std::string& dir) {
  pid_t pid = atoi(read_whole(dir + "/recorder.pid").c_str());
  std::string cmd = pid > 0 ? read_whole(fmt::format("/proc/{}/cmdline", pid)) : "";
  return cmd.find(dir + "/trace") != std::string::npos ? pid : -1;
}

// A recorder whose agent is gone (killed, its transport broken) still runs: with
// "stop", it is stopped as the agent would have; then its end is awaited.
void settle_orphan(const std::string& dir, bool stop, double wait_s) {
  const std::string trace = dir + "/trace";
  if (stop) unlink((dir + "/sync.hold").c_str());  // no controller will release its responder now
  if (stop && !meta_complete(trace))
    if (pid_t pid = running_recorder(dir); pid > 0) stop_recorder(dir, pid);
  auto end = Clock::now() + std::chrono::duration<double>(wait_s);
  while (!meta_complete(trace) && Clock::now() < end) usleep(100000);
}

int run_fetch(const AgentRequest& req, Out& out) {
  const std::string& dir = req.dir;
  uint64_t offset = req.offset;
  struct stat st;
  if (stat((dir + "/trace/events.cpt").c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("no trace in {} on this node", dir));
  if (read_whole(dir + "/status.json").empty()) settle_orphan(dir, req.stop, req.wait);
  std::string status = read_whole(dir + "/status.json");
  pump(out, dir + "/trace/events.cpt", offset, meta_complete(dir + "/trace") || !status.empty());
  std::string meta = read_whole(dir + "/trace/meta.json");
  if (!meta.empty()) out.send(WireType::Meta, 0, meta);
  nlohmann::json done;
  if (!status.empty())
    done = nlohmann::json::parse(status);
  else if (meta_complete(dir + "/trace"))
    done = {{"status", 0}, {"stopped_by", "fetch"}};  // its agent never saw the end
  else
    done = {{"running", true}};
  done["events_bytes"] = offset;
  out.send(WireType::Done, 0, json_text(done));
  return 0;
}

// The stream again after a break, while the recorder runs: events.cpt from
// `offset` as it grows, whole frames only, as the record agent sends it. "stop"
// stops the recorder (its own agent may be gone); at the recorder's end, the
// rest, meta.json and Done (its agent's status.json when it wrote one).
int run_follow(const AgentRequest& req, int in_fd, std::string& pending, Out& out) {
  const std::string dir = req.dir, events = dir + "/trace/events.cpt", alive = dir + kFollowerAlive;
  uint64_t offset = req.offset;
  out.send(WireType::Hello, 0, nlohmann::json{{"dir", dir}, {"follow", true}}.dump());
  const std::string hold = dir + "/sync.hold";
  bool signalled = false, stopped_said = false;
  for (pid_t rec; (rec = running_recorder(dir)) > 0 && read_whole(dir + "/status.json").empty();) {
    touch(alive);
    pollfd p{in_fd, POLLIN, 0};
    poll(&p, 1, 200);
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[4096];
      ssize_t n = read(in_fd, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR)) break;  // the controller gone again
      if (n > 0) pending.append(buf, size_t(n));
    }
    // Lines may have come with the request itself: parse whatever is pending.
    for (std::string c; take_line(pending, c);) {
      if (c == "stop" && !signalled) stop_recorder(dir, rec), signalled = true;
      if (c == "release") unlink(hold.c_str());
    }
    // The record agent's Stopped went down the broken stream: say it again here.
    if (!stopped_said && read_whole(hold).rfind("stopped", 0) == 0)
      out.send(WireType::Stopped, 0, "{}"), stopped_said = true;
    pump(out, events, offset, false);
    if (!out.open) break;
  }
  unlink(alive.c_str());
  if (running_recorder(dir) > 0 && read_whole(dir + "/status.json").empty())
    return 0;  // we are the ones gone: the recording goes on
  // Its agent, if alive, writes status.json right after the recorder's end.
  for (int i = 0; i < 40 && read_whole(dir + "/status.json").empty(); ++i) usleep(50000);
  pump(out, events, offset, true);
  std::string meta = read_whole(dir + "/trace/meta.json"), status = read_whole(dir + "/status.json");
  if (!meta.empty()) out.send(WireType::Meta, 0, meta);
  nlohmann::json done;
  if (!status.empty())
    done = nlohmann::json::parse(status);
  else if (meta_complete(dir + "/trace"))
    done = {{"status", 0}, {"stopped_by", signalled ? "controller" : "recorder"}};
  else  // gone without its stop sequence, and its agent with it: no exit status to tell
    done = {{"status", -1}, {"stderr_tail", "the recorder ended without its stop sequence; its agent is gone too"}};
  done["events_bytes"] = offset;
  out.send(WireType::Done, 0, json_text(done));
  return 0;
}

}  // namespace

int run_cluster_agent() {
  signal(SIGPIPE, SIG_IGN);  // a gone controller is seen as a failed write
  signal(SIGHUP, SIG_IGN);  // ssh's hangup: the recording goes on until the timeout
  std::string pending, line;
  bool eof = false;
  if (!read_line(0, pending, line, eof)) throw std::runtime_error("no request on stdin");
  const AgentRequest req = parse_agent_request(line);
  Out out;
  if (req.op == "record") return run_record(req, 0, pending, out);
  if (req.op == "fetch") return run_fetch(req, out);
  return run_follow(req, 0, pending, out);
}

}  // namespace cptrace
