// A real chronyd (Debian's package) steering this machine's clock, for tests that
// must hold while an NTP client does what it does on every server. The hand-made
// Slewer (clock_guard.h) toggles the clock on a schedule; chronyd decides for
// itself, from what it measures, and combines frequency, tick and status changes
// in ways no schedule written here would (the repro chrony-miss-1 failed only
// under it).
//
// Nothing talks to the network. chronyd's only source is its SHM refclock, fed by
// a thread of the test with a simulated reference: a function of
// CLOCK_MONOTONIC_RAW (which chronyd cannot bend) that wanders +-2 ms (sine, 30 s
// period) and drifts 150 ppm, from an offset of a few ms. Its config has no
// server, pool, NTP port, command port or socket, driftfile or RTC; chronyd slews
// and never steps (no makestep: chrony.conf(5) steps only with it).
//
// Order of teardown: chronyd is stopped (SIGTERM: it ends its slew and exits;
// SIGKILL after 5 s) before the test's ClockGuard restores the clock, and the SHM
// segment is removed on every exit path. A killed test process takes chronyd with
// it: chronyd gets SIGKILL when the thread that started it dies
// (PR_SET_PDEATHSIG), so it cannot adjust the clock after the guard process has
// restored it. That is why chronyd runs as root (`-u root`): dropping to _chrony
// would clear the death signal.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "clock_guard.h"

namespace realchronyd {

// Where Debian's package puts chronyd; empty when it is not installed.
inline std::string chronyd_path() {
  for (const char* p : {"/usr/sbin/chronyd", "/sbin/chronyd"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

// The pid of a chronyd this test did not start (a system service), or 0: two
// chronyds would fight over the clock, and the test could not say whose change it saw.
inline pid_t other_chronyd() {
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream f(d.path() / "comm");
    std::string comm;
    if (f && std::getline(f, comm) && comm == "chronyd") return pid_t(atoi(d.path().filename().c_str()));
  }
  return 0;
}

// The segment layout of ntpd's SHM driver, which chrony's refclock_shm.c reads
// (natural alignment, as both declare it).
struct ShmTime {
  int mode;  // 1: the reader takes a sample only if count is the same before and after its copy
  volatile int count;
  time_t clockTimeStampSec;  // the reference's time
  int clockTimeStampUSec;
  time_t receiveTimeStampSec;  // this machine's CLOCK_REALTIME when the reference read that
  int receiveTimeStampUSec;
  int leap;
  int precision;  // log2 seconds
  int nsamples;
  volatile int valid;
  unsigned clockTimeStampNSec;  // used by chrony when NSec / 1000 == USec
  unsigned receiveTimeStampNSec;
  int dummy[8];
};

constexpr key_t kShmKeyBase = 0x4e545030;  // "NTP0": the driver's key of unit 0

// The SysV segment of SHM unit `unit`, created here (so it exists, owned by root,
// before chronyd attaches) and removed on destruction. A stale segment nobody is
// attached to (a crashed run) is removed first; one in use is an error.
class ShmSegment {
 public:
  explicit ShmSegment(int unit) : key_(kShmKeyBase + unit) {
    id_ = shmget(key_, sizeof(ShmTime), IPC_CREAT | IPC_EXCL | 0600);
    if (id_ < 0 && errno == EEXIST) {
      int old = shmget(key_, 0, 0);
      shmid_ds ds{};
      if (old >= 0 && shmctl(old, IPC_STAT, &ds) == 0 && ds.shm_nattch == 0) {
        shmctl(old, IPC_RMID, nullptr);
        id_ = shmget(key_, sizeof(ShmTime), IPC_CREAT | IPC_EXCL | 0600);
      } else {
        error_ = "SHM key " + hex(key_) + " exists and is attached: another refclock user";
        return;
      }
    }
    if (id_ < 0) {
      error_ = "shmget " + hex(key_) + ": " + strerror(errno);
      return;
    }
    void* p = shmat(id_, nullptr, 0);
    if (p == (void*)-1) {
      error_ = std::string("shmat: ") + strerror(errno);
      return;
    }
    shm_ = static_cast<ShmTime*>(p);
    memset(shm_, 0, sizeof(ShmTime));
  }
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment() {
    if (shm_) shmdt(shm_);
    if (id_ >= 0) shmctl(id_, IPC_RMID, nullptr);  // freed once chronyd, too, has detached
  }
  const std::string& error() const { return error_; }

  // One sample, mode 1: valid cleared and count moved around the write, so a
  // reader that copied while it ran sees either valid == 0 or a changed count.
  void write(int64_t clock_ns, int64_t receive_ns) {
    shm_->valid = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    shm_->count = shm_->count + 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    shm_->mode = 1;
    shm_->clockTimeStampSec = time_t(clock_ns / 1000000000);
    shm_->clockTimeStampNSec = unsigned(clock_ns % 1000000000);
    shm_->clockTimeStampUSec = int(shm_->clockTimeStampNSec / 1000);
    shm_->receiveTimeStampSec = time_t(receive_ns / 1000000000);
    shm_->receiveTimeStampNSec = unsigned(receive_ns % 1000000000);
    shm_->receiveTimeStampUSec = int(shm_->receiveTimeStampNSec / 1000);
    shm_->leap = 0;
    shm_->precision = -20;  // ~1 us: two clock reads apart
    shm_->nsamples = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    shm_->count = shm_->count + 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    shm_->valid = 1;
  }

 private:
  static std::string hex(key_t k) {
    char b[16];
    snprintf(b, sizeof b, "0x%x", unsigned(k));
    return b;
  }
  key_t key_;
  int id_ = -1;
  ShmTime* shm_ = nullptr;
  std::string error_;
};

// What chronyd is made to follow, and how the test waits for it.
struct ChronyPlan {
  double base_offset_ms = 4;  // the reference's offset from this clock at start: chronyd slews it away
  double wander_ms = 2;  // amplitude of the sine
  double wander_period_s = 30;
  double drift_ppm = 150;  // against CLOCK_MONOTONIC_RAW
  double settle_s = 3;  // after chronyd selected the source, before the recording starts
  int min_adjustments = 3;  // frequency/tick changes chronyd must make during the recording
};

// The reference, read at a CLOCK_MONOTONIC_RAW instant: CLOCK_REALTIME at the
// plan's start, advanced along RAW with the drift, the sine and the base offset.
struct Reference {
  ChronyPlan plan;
  int64_t raw0 = 0, real0 = 0;
  int64_t at(int64_t raw_ns) const {
    double t = double(raw_ns - raw0) / 1e9;
    double extra_ns = plan.base_offset_ms * 1e6 + plan.drift_ppm * 1e3 * t +
                      plan.wander_ms * 1e6 * std::sin(2 * M_PI * t / plan.wander_period_s);
    return real0 + (raw_ns - raw0) + int64_t(std::llround(extra_ns));
  }
};

// A change of the kernel's NTP state, seen by the test's own watch of adjtimex.
struct StateChange {
  int64_t raw_ns;
  long freq, tick;  // freq in ppm << 16, tick in us
  int status;
};

// chronyd, its reference feed and a watch on what it does to the clock, from
// construction until stop() or destruction.
class Chronyd {
 public:
  Chronyd(const ChronyPlan& plan, const std::string& dir, int shm_unit = 77) : shm_(shm_unit) {
    if (!shm_.error().empty()) {
      error_ = shm_.error();
      return;
    }
    ref_.plan = plan;
    ref_.raw0 = clockguard::clock_ns(CLOCK_MONOTONIC_RAW);
    ref_.real0 = clockguard::clock_ns(CLOCK_REALTIME);
    conf_ = dir + "/chrony.conf";
    log_ = dir + "/chronyd.log";
    std::ofstream(conf_) << "# Only the simulated reference: no server, pool, NTP or command port.\n"
                         << "refclock SHM " << shm_unit << " poll 0 dpoll -2 refid SIM\n"
                         << "maxslewrate 83333\n"
                         << "port 0\n"
                         << "cmdport 0\n"
                         << "bindcmdaddress /\n"
                         << "pidfile " << dir << "/chronyd.pid\n";
    feeder_ = std::thread([this] { feed(); });
    watcher_ = std::thread([this] { watch(); });
    const std::string bin = chronyd_path();
    int logfd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {  // only async-signal-safe calls: the test has threads
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);  // the test died before the signal was armed
      dup2(logfd, 2);  // -d: chronyd logs to stderr
      execl(bin.c_str(), "chronyd", "-d", "-u", "root", "-f", conf_.c_str(), nullptr);
      _exit(127);
    }
    if (logfd >= 0) close(logfd);
    if (pid_ < 0) error_ = std::string("fork: ") + strerror(errno);
  }
  Chronyd(const Chronyd&) = delete;
  Chronyd& operator=(const Chronyd&) = delete;
  ~Chronyd() { stop(); }

  const std::string& error() const { return error_; }
  std::string log() const {
    std::ifstream f(log_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  // Waits until chronyd has selected the reference (its log says so), then
  // plan.settle_s more, so the recording starts on a clock chronyd steers.
  bool wait_locked(double timeout_s = 30) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (log().find("Selected source SIM") == std::string::npos) {
      if (std::chrono::steady_clock::now() > end || !running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(ref_.plan.settle_s));
    return running();
  }
  bool running() {
    if (pid_ <= 0) return false;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "chronyd exited: " + log();
    }
    return pid_ > 0;
  }

  // Ends chronyd (SIGTERM; SIGKILL after 5 s), then the feed and the watch.
  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (waitpid(pid_, nullptr, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > end) {
          kill(pid_, SIGKILL);
          waitpid(pid_, nullptr, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      pid_ = -1;
    }
    stop_ = true;
    if (feeder_.joinable()) feeder_.join();
    if (watcher_.joinable()) watcher_.join();
  }
  pid_t pid() const { return pid_; }

  // Every change of frequency or tick the watch saw (after stop()).
  const std::vector<StateChange>& changes() const { return changes_; }

 private:
  // A sample every 100 ms: chronyd reads the segment at dpoll -2 (4 Hz) and
  // clears it, so each read finds a fresh one.
  void feed() {
    while (!stop_) {
      int64_t real = clockguard::clock_ns(CLOCK_REALTIME), raw = clockguard::clock_ns(CLOCK_MONOTONIC_RAW);
      shm_.write(ref_.at(raw), real);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  // adjtimex(modes = 0) every 2 ms: the test's own count of chronyd's changes,
  // independent of what the recorder saw. Two changes within 2 ms count once.
  void watch() {
    timex last{};
    bool first = true;
    while (!stop_) {
      timex tx{};
      if (adjtimex(&tx) >= 0 && (first || tx.freq != last.freq || tx.tick != last.tick)) {
        if (!first) changes_.push_back({clockguard::clock_ns(CLOCK_MONOTONIC_RAW), tx.freq, tx.tick, tx.status});
        last = tx, first = false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  ShmSegment shm_;
  Reference ref_;
  std::string conf_, log_, error_;
  pid_t pid_ = -1;
  std::atomic<bool> stop_{false};
  std::vector<StateChange> changes_;
  std::thread feeder_, watcher_;
};

}  // namespace realchronyd
