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
#include "record/namespace_pids.h"
#include "record/run_dir.h"

namespace cptrace {

namespace {

// One level of kFollowDir (run_dir.h), or the error that says why not.
int open_dir_level(int parent, const char* name, const std::string& shown) {
  RunDirLevel l = open_run_dir_level(parent, name);
  switch (l.fault) {
    case RunDirFault::None:
      return l.fd;
    case RunDirFault::Creating:
      throw std::runtime_error(
          fmt::format("following child processes: creating {}: {} (--no-inherit records the process alone)", shown,
                      strerror(l.err)));
    case RunDirFault::Opening:
      throw std::runtime_error(fmt::format(
          "following child processes: {}: {} (a symlink is refused; --no-inherit records the process alone)", shown,
          strerror(l.err)));
    case RunDirFault::NotRootOnly:
      break;
  }
  throw std::runtime_error(
      fmt::format("following child processes: {} must be a directory owned by root and writable by root only", shown));
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

ProcessFollower::ProcessFollower(Probes& probes, pid_t root, AttachedFn on_attached)
    : probes_(probes), hello_(probes, probes.targets()), on_attached_(std::move(on_attached)) {
  dir_fd_ = open_follow_dir();
  remove_stale_follow_files(dir_fd_);
  try {
    lock_running();
  } catch (...) {
    release();
    throw;
  }
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
  mark(root, read_namespace_pid(uint32_t(root)));
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

// recorder.<our pid>, locked while we run: how a process in another pid
// namespace, which cannot see our pid, tells that we still run (lib/follow_wait.c).
// Its content is our pid too, so remove_stale_follow_files() treats it as a mark.
void ProcessFollower::lock_running() {
  lock_name_ = fmt::format("recorder.{}", getpid());
  lock_fd_ = openat(dir_fd_, lock_name_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    throw std::runtime_error(
        fmt::format("following child processes: creating {}/{}: {}", kFollowDir, lock_name_, strerror(errno)));
  std::string me = std::to_string(getpid());
  struct flock lk {};
  lk.l_type = F_WRLCK;
  lk.l_whence = SEEK_SET;
  if (write(lock_fd_, me.data(), me.size()) != ssize_t(me.size()) || fcntl(lock_fd_, F_OFD_SETLK, &lk) != 0)
    throw std::runtime_error(
        fmt::format("following child processes: locking {}/{}: {}", kFollowDir, lock_name_, strerror(errno)));
}

void ProcessFollower::release() {
  if (dir_fd_ >= 0)
    for (const auto& [p, names] : marked_)
      for (const std::string& n : names) unlinkat(dir_fd_, n.c_str(), 0);
  marked_.clear();
  if (lock_fd_ >= 0) {
    unlinkat(dir_fd_, lock_name_.c_str(), 0);
    close(lock_fd_);
    lock_fd_ = -1;
  }
  waiter_.reset();
  if (rb_) ring_buffer__free(rb_);
  if (dir_fd_ >= 0) close(dir_fd_);
  rb_ = nullptr;
  dir_fd_ = -1;
}

// The mark under the names the process can compute itself: "<pid namespace
// inode>.<its pid there>" (in a container it knows no other pid), and the plain
// host pid, which libcptrace builds older than the namespace names look for.
void ProcessFollower::mark(pid_t pid, const std::optional<PidEntry>& ns) {
  std::vector<std::string> names = {std::to_string(pid)};
  if (ns) names.push_back(fmt::format("{}.{}", ns->pidns, ns->nspid));
  std::string me = std::to_string(getpid());
  std::vector<std::string> written;
  for (const std::string& name : names) {
    int fd = openat(dir_fd_, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) continue;  // the child then does not wait: its first events may be missed
    (void)!write(fd, me.data(), me.size());
    close(fd);
    written.push_back(name);
  }
  if (!written.empty()) marked_[pid] = std::move(written);
}

void ProcessFollower::unmark(pid_t pid) {
  auto it = marked_.find(pid);
  if (it == marked_.end()) return;
  for (const std::string& n : it->second) unlinkat(dir_fd_, n.c_str(), 0);
  marked_.erase(it);
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
      std::optional<PidEntry> ns = read_namespace_pid(r->tgid);  // the child waits: it is there to read
      if (f->on_attached_) f->on_attached_(pid_t(r->tgid), ns);
      f->mark(pid_t(r->tgid), ns);
    } else {
      f->missed_++;
    }
  } else if (r->kind == CP_PROC_HELLO) {
    f->hello_.on_hello(*r);  // after its fork's record: attached to already
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
