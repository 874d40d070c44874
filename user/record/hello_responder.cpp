#include "record/hello_responder.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "probe/probe_attach.h"
#include "os/say.h"
#include "clock/clock_now.h"

namespace cptrace {

namespace {

constexpr size_t kMaxWaits = 1 << 20;  // samples of the wait kept (4 MiB)

// The file as the kernel's uprobes know it (they resolve the path we give).
std::optional<std::pair<uint64_t, uint64_t>> file_key(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::pair<uint64_t, uint64_t>{st.st_dev, st.st_ino};
}

}  // namespace

bool answer_hello(pid_t pid, uint64_t hello) {
  uint32_t v = CP_HELLO_ATTACHED;
  iovec local{&v, sizeof(v)};
  iovec remote{reinterpret_cast<void*>(hello + offsetof(cp_hello, state)), sizeof(v)};
  return process_vm_writev(pid, &local, 1, &remote, 1, 0) == ssize_t(sizeof(v));
}

HelloResponder::HelloResponder(Probes& probes, const std::vector<std::string>& targets) : probes_(probes) {
  for (const std::string& t : targets)
    if (auto k = file_key(t)) attached_.insert(*k);
  // Never ourselves: cptrace carries probe sites of its own (`cptrace check`),
  // and the recorder must not record its own drain.
  if (auto self = file_key("/proc/self/exe")) attached_.insert(*self);
}

// A file attached already is attached for this process too: nothing more with
// --all (no pid filter), the uprobe events it lacks when following.
bool HelloResponder::attach(const MappedFile& f, uint32_t tgid) {
  auto key = file_key(f.path);
  if (!key) return false;
  try {
    if (attached_.count(*key)) return probes_.cover_process(tgid);
    if (!probes_.add_target(f.path, tgid)) return false;
    attached_.insert(*key);
    return true;
  } catch (const std::exception& e) {
    say("{} (pid {}): {}", f.path, tgid, e.what());
    attached_.insert(*key);  // not again for every process of it
    return false;
  }
}

void HelloResponder::on_hello(const cp_proc_rec& r) {
  std::optional<MappedFile> f = mapped_file_at(pid_t(r.tgid), r.site);
  bool ok = false;
  {
    std::lock_guard lk(mu_);
    if (f && access(f->path.c_str(), R_OK) != 0 && unreadable_.insert(f->path).second)
      say("pid {}: cannot read its library {} ({}): a file or directory only its owner may "
          "read needs CAP_DAC_READ_SEARCH; its events are not recorded",
          r.tgid, f->path, strerror(errno));
    ok = f && files_.holds_probe_site(*f) && attach(*f, r.tgid);
    files_checked_ = files_.files_checked();
  }
  // Answered even when we could not attach: it would wait the full bound for nothing.
  bool answered = answer_hello(pid_t(r.tgid), r.hello);
  if (!answered && errno == EPERM && !warned_eperm_.exchange(true))
    say("pid {}: cannot answer its hello (process_vm_writev: {}): writing into another "
        "process needs CAP_SYS_PTRACE, and no security module refusing it; its events are not recorded",
        r.tgid, strerror(EPERM));
  if (answered && ok) {
    answered_++;
    std::lock_guard lk(mu_);
    uint64_t ns = uint64_t(mono_ns());
    if (waits_us_.size() < kMaxWaits && ns > r.ktime_ns) waits_us_.push_back(uint32_t((ns - r.ktime_ns) / 1000));
  } else {
    unanswered_++;
  }
}

nlohmann::json HelloResponder::wait_json() const {
  std::vector<uint32_t> w;
  {
    std::lock_guard lk(mu_);
    w = waits_us_;
  }
  std::sort(w.begin(), w.end());
  auto at = [&](double q) { return w.empty() ? 0u : w[std::min(w.size() - 1, size_t(q * double(w.size())))]; };
  return {{"count", w.size()}, {"median_us", at(0.5)}, {"p99_us", at(0.99)}, {"max_us", w.empty() ? 0u : w.back()}};
}

// One process at a time under the lock, so that a hello is answered between two.
void HelloResponder::scan_node() {
  for (pid_t pid : all_processes()) {
    std::lock_guard lk(mu_);
    std::vector<MappedFile> files = files_.of_process(pid);
    for (const MappedFile& f : files) attach(f, uint32_t(pid));
    if (!files.empty() && pid != getpid()) scanned_.push_back(pid);
    files_checked_ = files_.files_checked();
  }
}

}  // namespace cptrace
