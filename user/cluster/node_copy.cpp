#include "cluster/node_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "os/output_dir.h"
#include "os/say.h"

namespace cptrace::cluster {

namespace {

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
      n.done_json = parse_done(f.data);  // checked first: done means a usable Done
      n.done = true;
      break;
  }
}

}  // namespace

void write_file(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("create {}: {}", tmp, strerror(errno)));
  bool ok = write_all(fd, content.data(), content.size()) && fsync(fd) == 0;
  if (close(fd) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(fmt::format("write {}: {}", path, strerror(errno)));
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

void complete_copy(NodeRun& n) {
  // A stream that reached its Done whole needs nothing more, even from a failed recorder.
  bool whole = n.done && !n.done_json.value("running", false) &&
               n.received == n.done_json.value("events_bytes", uint64_t(0)) && n.problem.empty();
  if (!whole && (n.hello || n.received > 0 || n.done)) {
    say("node {}: stream ended at byte {}{}; fetching the rest", n.spec.name, n.received,
        n.problem.empty() ? "" : " (" + n.problem + ")");
    run_fetch(n);
    n.resumed = n.resumed || n.broke_at_s >= 0;
  }
  if (!n.meta.empty()) write_file(n.local + "/meta.json", n.meta);
  if (n.events_fd >= 0 && n.complete()) ftruncate(n.events_fd, off_t(n.received));
  if (n.events_fd >= 0) close(n.events_fd), n.events_fd = -1;
}

}  // namespace cptrace::cluster
