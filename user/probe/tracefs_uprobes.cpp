#include "probe/tracefs_uprobes.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace fs = std::filesystem;

namespace cptrace {

namespace {

constexpr const char* kGroupPrefix = "cptrace_";

bool has_uprobe_events(const std::string& dir) { return access((dir + "/uprobe_events").c_str(), W_OK) == 0; }

// Where tracefs is; mounts it on its usual place when nothing is mounted
// (systemd normally does; a minimal VM or container may not).
std::string find_tracefs() {
  for (const char* d : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"})
    if (has_uprobe_events(d)) return d;
  const char* dir = "/sys/kernel/tracing";
  if (mount("nodev", dir, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    throw std::runtime_error(
        fmt::format("following child processes needs tracefs (uprobe_events), which is not mounted and could not be "
                    "mounted on {}: {} (--no-inherit records the process alone)",
                    dir, strerror(errno)));
  if (!has_uprobe_events(dir))
    throw std::runtime_error(
        fmt::format("following child processes needs uprobe events: {}/uprobe_events is missing (kernel without "
                    "CONFIG_UPROBE_EVENTS?; --no-inherit records the process alone)",
                    dir));
  return dir;
}

// One command to tracefs's uprobe_events (the kernel logs syntax errors in error_log).
void command(const std::string& tracefs, const std::string& line) {
  std::string file = tracefs + "/uprobe_events";
  int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: {}", file, strerror(errno)));
  ssize_t n = write(fd, line.data(), line.size());
  int err = errno;
  close(fd);
  if (n != ssize_t(line.size()))
    throw std::runtime_error(fmt::format("{}: `{}`: {}", file, line, strerror(n < 0 ? err : EIO)));
}

int read_event_id(const std::string& dir) {
  std::ifstream f(dir + "/id");
  int id = -1;
  if (!(f >> id) || id < 0) throw std::runtime_error("cannot read the id of tracefs event " + dir);
  return id;
}

// Names in a tracefs directory; an error (the directory going away while we
// read it) ends the list rather than the recording.
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  while (!ec && it != end) {
    out.push_back(it->path().filename().string());
    it.increment(ec);
  }
  return out;
}

void remove_group(const std::string& tracefs, const std::string& group) {
  for (const auto& name : list_dir(tracefs + "/events/" + group)) {
    if (access((tracefs + "/events/" + group + "/" + name + "/id").c_str(), F_OK) != 0) continue;
    try {
      command(tracefs, "-:" + group + "/" + name);
    } catch (const std::exception&) {
      // Still open by someone (EBUSY): left; it costs nothing without a perf event.
    }
  }
}

}  // namespace

std::vector<std::string> stale_uprobe_groups(const std::string& tracefs) {
  std::vector<std::string> out;
  for (const auto& name : list_dir(tracefs + "/events")) {
    if (!name.starts_with(kGroupPrefix)) continue;
    const char* b = name.data() + strlen(kGroupPrefix);
    const char* end = name.data() + name.size();
    pid_t pid = 0;
    auto [p, err] = std::from_chars(b, end, pid);
    if (err != std::errc() || p != end || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) out.push_back(name);
  }
  return out;
}

TracefsUprobes::TracefsUprobes() : tracefs_(find_tracefs()), group_(kGroupPrefix + std::to_string(getpid())) {
  for (const auto& g : stale_uprobe_groups(tracefs_)) remove_group(tracefs_, g);
  remove_group(tracefs_, group_);  // a dead recorder that had our pid
}

// The file is named to the kernel through a descriptor of ours
// (/proc/self/fd/N, which the kernel resolves as we write): uprobe_events
// splits on white space and has no quoting, so a path with a space could not
// be written, and the event gets exactly the file we opened.
size_t TracefsUprobes::add(const std::string& path, uint64_t file_offset) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: {}", path, strerror(errno)));
  std::string name = "s" + std::to_string(names_.size());
  try {
    command(tracefs_, fmt::format("p:{}/{} /proc/self/fd/{}:{:#x}", group_, name, fd, file_offset));
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  names_.push_back(name);
  ids_.push_back(read_event_id(tracefs_ + "/events/" + group_ + "/" + name));
  return ids_.size() - 1;
}

int TracefsUprobes::open(size_t index, pid_t pid) const {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = uint64_t(ids_.at(index));
  return int(syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

void TracefsUprobes::remove_all() {
  for (const auto& n : names_) {
    try {
      command(tracefs_, "-:" + group_ + "/" + n);
    } catch (const std::exception&) {
      // Still in use (a descriptor not closed): the next recorder removes it.
    }
  }
  names_.clear();
  ids_.clear();
}

}  // namespace cptrace
