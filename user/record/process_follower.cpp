#include "record/process_follower.h"

#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cptrace_records.h"
#include "probe/probe_attach.h"

namespace cptrace {

namespace {

// One level of kFollowDir: created if missing, never through a symlink, and
// only used when root owns it and nobody else may write in it (children trust
// what they read there).
int open_dir_level(int parent, const char* name, const std::string& shown) {
  if (mkdirat(parent, name, 0755) != 0 && errno != EEXIST)
    throw std::runtime_error(fmt::format("following child processes: creating {}: {} (--no-inherit records the process alone)",
                                         shown, strerror(errno)));
  int fd = openat(parent, name, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(fmt::format("following child processes: {}: {} (a symlink is refused; --no-inherit records the process alone)",
                                         shown, strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022)) {
    close(fd);
    throw std::runtime_error(fmt::format(
        "following child processes: {} must be a directory owned by root and writable by root only", shown));
  }
  return fd;
}

int open_follow_dir() {
  int run = open("/run", O_DIRECTORY | O_CLOEXEC);
  if (run < 0) throw std::runtime_error(fmt::format("/run: {}", strerror(errno)));
  int top = -1;
  try {
    top = open_dir_level(run, "cptrace", "/run/cptrace");
    close(run);
    run = -1;
    int dir = open_dir_level(top, "follow", kFollowDir);
    close(top);
    return dir;
  } catch (...) {
    if (run >= 0) close(run);
    if (top >= 0) close(top);
    throw;
  }
}

pid_t parse_pid(const char* b, const char* e) {
  pid_t v = 0;
  auto [p, err] = std::from_chars(b, e, v);
  return err == std::errc() && p == e && v > 0 ? v : 0;
}

// The recorder pid a follow file holds (0 if unreadable).
pid_t recorder_of(int dir_fd, const char* name) {
  int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[16];
  ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n <= 0) return 0;
  return parse_pid(buf, buf + n);
}

}  // namespace

void remove_stale_follow_files(int dir_fd) {
  int dup_fd = dup(dir_fd);
  DIR* d = dup_fd >= 0 ? fdopendir(dup_fd) : nullptr;
  if (!d) {
    if (dup_fd >= 0) close(dup_fd);
    return;
  }
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    pid_t rec = recorder_of(dir_fd, e->d_name);
    if (rec == 0 || (kill(rec, 0) != 0 && errno == ESRCH)) unlinkat(dir_fd, e->d_name, 0);
  }
  closedir(d);
}

ProcessFollower::ProcessFollower(Probes& probes, pid_t root) : probes_(probes) {
  dir_fd_ = open_follow_dir();
  remove_stale_follow_files(dir_fd_);
  int fd = probes.proc_events_fd();
  rb_ = fd >= 0 ? ring_buffer__new(fd, &ProcessFollower::on_record, this, nullptr) : nullptr;
  if (!rb_) {
    int err = errno;
    release();
    throw std::runtime_error(fmt::format("following child processes: {}", strerror(err)));
  }
  try {
    waiter_ = std::make_unique<RingWaiter>(rb_, "following child processes");
  } catch (...) {
    release();
    throw;
  }
  mark(root);
  thread_ = std::thread([this] { run(); });
}

ProcessFollower::~ProcessFollower() {
  if (thread_.joinable()) {
    stop_ = true;
    waiter_->wake();
    thread_.join();
  }
  release();
}

void ProcessFollower::release() {
  if (dir_fd_ >= 0)
    for (pid_t p : marked_) unlinkat(dir_fd_, std::to_string(p).c_str(), 0);
  marked_.clear();
  waiter_.reset();
  if (rb_) ring_buffer__free(rb_);
  if (dir_fd_ >= 0) close(dir_fd_);
  rb_ = nullptr;
  dir_fd_ = -1;
}

void ProcessFollower::mark(pid_t pid) {
  std::string name = std::to_string(pid);
  int fd = openat(dir_fd_, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;  // the child then does not wait: its first events may be missed
  std::string me = std::to_string(getpid());
  (void)!write(fd, me.data(), me.size());
  close(fd);
  marked_.insert(pid);
}

void ProcessFollower::unmark(pid_t pid) {
  if (marked_.erase(pid)) unlinkat(dir_fd_, std::to_string(pid).c_str(), 0);
}

// The child waits (lib/follow_wait.c) until its file says that it is
// attached, programs included; only then can it fork children of its own.
int ProcessFollower::on_record(void* self, void* data, size_t size) {
  auto* f = static_cast<ProcessFollower*>(self);
  if (size < sizeof(cp_proc_rec)) return 0;
  const auto* r = static_cast<const cp_proc_rec*>(data);
  if (r->kind == CP_PROC_FORK) {
    if (f->probes_.attach_process(r->tgid)) {
      f->forks_++;
      f->mark(pid_t(r->tgid));
    } else {
      f->missed_++;
    }
  } else if (r->kind == CP_PROC_EXIT) {
    f->unmark(pid_t(r->tgid));
    f->probes_.detach_process(r->tgid);
  }
  return 0;
}

void ProcessFollower::run() {
  while (!stop_) {
    if (!waiter_->wait(-1)) break;
    ring_buffer__consume(rb_);
  }
  ring_buffer__consume(rb_);
}

}  // namespace cptrace
