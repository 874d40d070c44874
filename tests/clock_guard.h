// Tests that adjust this machine's clock the way NTP clients do (adjtimex: frequency,
// tick length, kernel-PLL offset slews, adjtime() slews, CLOCK_REALTIME steps), and
// the guard that puts the clock back on every exit path, so no later test inherits a
// slewed clock.
//
// ClockGuard snapshots the kernel's NTP state and CLOCK_REALTIME - CLOCK_MONOTONIC and
// restores both from its destructor (also after a failed assertion: gtest returns
// from the test body, the destructor runs). A killed test process runs no destructor,
// so the guard also forks a small guard process that waits for its parent's death
// (pipe EOF, PR_SET_PDEATHSIG, or a changed parent pid: any of the three) and then
// restores and exits. After a normal restore the destructor tells the guard process
// to exit without touching the clock and reaps it, so it never lingers.
#pragma once
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace clockguard {

inline int64_t clock_ns(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// CLOCK_REALTIME - CLOCK_MONOTONIC, read as the narrowest of a few MONO/REAL/MONO
// brackets: `err_ns` is half that bracket, so the true difference at that instant
// is within diff_ns +- err_ns. Only steps move it (slews bend both clocks alike).
struct RealMonoDiff {
  int64_t diff_ns = 0;
  int64_t err_ns = 0;
};
inline RealMonoDiff read_real_minus_mono() {
  RealMonoDiff best{0, INT64_MAX};
  for (int i = 0; i < 16; i++) {
    int64_t m1 = clock_ns(CLOCK_MONOTONIC), r = clock_ns(CLOCK_REALTIME), m2 = clock_ns(CLOCK_MONOTONIC);
    int64_t half = (m2 - m1 + 1) / 2;
    if (half < best.err_ns) best = {r - (m1 + (m2 - m1) / 2), half};
  }
  return best;
}

// The part of the kernel's NTP state that a clock adjuster changes.
struct ClockState {
  long freq = 0;  // scaled ppm (ppm << 16)
  long tick = 0;  // microseconds per tick
  int status = 0;  // STA_* bits
  long constant = 0;  // PLL time constant, as adjtimex reports it
  long offset = 0;  // remaining PLL offset being slewed (ns if STA_NANO, else us)
  long maxerror = 0, esterror = 0;
  long adjtime_left_us = 0;  // an adjtime() slew still in progress (ADJ_OFFSET_SS_READ)
  RealMonoDiff real_mono;
};

// What is left of an adjtime() slew, in us (0 if the read fails).
inline long read_adjtime_left_us() {
  timex ss{};
  ss.modes = ADJ_OFFSET_SS_READ;
  return adjtimex(&ss) < 0 ? 0 : ss.offset;
}

inline ClockState read_clock_state() {
  timex tx{};
  ClockState s;
  if (adjtimex(&tx) < 0) return s;
  s.freq = tx.freq;
  s.tick = tx.tick;
  s.status = tx.status;
  s.constant = tx.constant;
  s.offset = tx.offset;
  s.maxerror = tx.maxerror;
  s.esterror = tx.esterror;
  s.adjtime_left_us = read_adjtime_left_us();
  s.real_mono = read_real_minus_mono();
  return s;
}

// Steps CLOCK_REALTIME by delta_ns atomically (ADJ_SETOFFSET is relative, so no
// read-then-set race). The kernel clears the PLL state on a step (STA_UNSYNC,
// offset 0), as it does for any settimeofday. Only syscalls: safe after fork().
inline int step_realtime_raw(int64_t delta_ns) {
  timex tx{};
  tx.modes = ADJ_SETOFFSET | ADJ_NANO;
  int64_t sec = delta_ns / 1000000000, nsec = delta_ns % 1000000000;
  if (nsec < 0) sec -= 1, nsec += 1000000000;  // the kernel wants 0 <= nsec < 1e9
  tx.time.tv_sec = sec;
  tx.time.tv_usec = nsec;  // nanoseconds with ADJ_NANO
  return adjtimex(&tx) < 0 ? -errno : 0;
}

// Puts `s` back. Order matters (kernel/time/ntp.c): a step clears the NTP state, so it
// goes first; ADJ_OFFSET only acts with STA_PLL set and moves the frequency, so the
// offset is restored with STA_PLL forced on, and frequency/tick/status after it.
// The constant is written in nano mode, where the kernel stores it as given (micro
// mode adds 4). Only syscalls: the guard process calls this after fork().
inline int restore_clock_state_raw(const ClockState& s) {
  // Stepped only when the difference moved by more than the two readings' errors:
  // stepping on reading jitter would itself move CLOCK_REALTIME by that jitter.
  RealMonoDiff now = read_real_minus_mono();
  int64_t delta = s.real_mono.diff_ns - now.diff_ns;
  if (delta > now.err_ns + s.real_mono.err_ns || -delta > now.err_ns + s.real_mono.err_ns) {
    int rc = step_realtime_raw(delta);
    if (rc) return rc;
  }
  bool nano = s.status & STA_NANO;
  timex a{};
  a.modes = ADJ_NANO | ADJ_STATUS | ADJ_TIMECONST | ADJ_OFFSET;
  a.status = s.status | STA_PLL;
  a.constant = s.constant;
  a.offset = nano ? s.offset : s.offset * 1000;
  if (adjtimex(&a) < 0) return -errno;
  timex b{};
  b.modes = ADJ_STATUS | ADJ_FREQUENCY | ADJ_TICK | ADJ_MAXERROR | ADJ_ESTERROR | (nano ? ADJ_NANO : ADJ_MICRO);
  b.status = s.status;
  b.freq = s.freq;
  b.tick = s.tick;
  b.maxerror = s.maxerror;
  b.esterror = s.esterror;
  if (adjtimex(&b) < 0) return -errno;
  // An adjtime() slew is independent of the PLL and survives all of the above;
  // left alone when it is as saved (no needless call for recorders to witness).
  if (read_adjtime_left_us() != s.adjtime_left_us) {
    timex c{};
    c.modes = ADJ_OFFSET_SINGLESHOT;
    c.offset = s.adjtime_left_us;
    if (adjtimex(&c) < 0) return -errno;
  }
  return 0;
}

// The adjustments an NTP client makes. Each returns 0 or -errno.
inline int set_freq_ppm(double ppm) {  // the kernel limits it to +-500 ppm
  timex tx{};
  tx.modes = ADJ_FREQUENCY;
  tx.freq = long(ppm * 65536.0);
  return adjtimex(&tx) < 0 ? -errno : 0;
}
// 10000 us per tick is nominal at USER_HZ 100; the kernel accepts +-10 % (chrony's range).
inline int set_tick(long usec_per_tick) {
  timex tx{};
  tx.modes = ADJ_TICK;
  tx.tick = usec_per_tick;
  return adjtimex(&tx) < 0 ? -errno : 0;
}
// Hands the kernel PLL an offset to slew away (ntpd, systemd-timesyncd): the kernel
// then bends the clock by a decaying share of what is left each second, a rate
// change no straight line between correlation points follows. Constant 2 in nano
// mode slews 1/16 of what is left per second.
inline int pll_offset_slew_us(long offset_us, long constant = 2) {
  timex tx{};
  tx.modes = ADJ_STATUS | ADJ_OFFSET | ADJ_TIMECONST | ADJ_NANO;
  timex cur{};
  adjtimex(&cur);
  tx.status = (cur.status | STA_PLL) & ~STA_UNSYNC;
  tx.constant = constant;
  tx.offset = offset_us * 1000;
  return adjtimex(&tx) < 0 ? -errno : 0;
}
inline int step_realtime_ns(int64_t delta_ns) { return step_realtime_raw(delta_ns); }
// glibc's adjtime(): the kernel's single-shot slew (ADJ_OFFSET_SINGLESHOT, independent
// of the PLL) adds up to 500 us of each second to the tick length at every
// CLOCK_REALTIME second until the offset is gone, then, one second after its last
// chunk, puts the base rate back: that last change comes with no call.
inline int adjtime_slew_us(long offset_us) {
  timeval tv{offset_us / 1000000, offset_us % 1000000};
  return adjtime(&tv, nullptr) < 0 ? -errno : 0;
}

// The guard process: waits for its parent's death, or for a byte on the pipe saying
// the parent restored the clock itself. Never returns.
[[noreturn]] inline void guard_process_main(int rfd, pid_t parent, const ClockState& saved) {
  // Interrupts the poll when the parent dies (the pipe may stay open in another
  // forked child); the handler only has to exist so poll returns EINTR.
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  sigaction(SIGUSR2, &sa, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGUSR2);
  for (;;) {
    if (getppid() != parent) break;  // died before PDEATHSIG was armed, or missed it
    pollfd p{rfd, POLLIN, 0};
    int n = poll(&p, 1, 200);
    if (n > 0) {
      char c = 0;
      ssize_t r = read(rfd, &c, 1);
      if (r == 1 && c == 'q') _exit(0);  // parent restored it: nothing to do
      if (r == 0) break;  // EOF: parent gone
    }
  }
  _exit(restore_clock_state_raw(saved) == 0 ? 0 : 1);
}

class ClockGuard {
 public:
  ClockGuard() : saved_(read_clock_state()) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;  // CLOEXEC: exec'd test programs hold no end
    pid_t parent = getpid();
    guard_pid_ = fork();
    if (guard_pid_ == 0) {
      close(fds[1]);
      guard_process_main(fds[0], parent, saved_);
    }
    close(fds[0]);
    wfd_ = fds[1];
  }
  ClockGuard(const ClockGuard&) = delete;
  ClockGuard& operator=(const ClockGuard&) = delete;
  ~ClockGuard() {
    int rc = restore();
    EXPECT_EQ(rc, 0) << "ClockGuard: restoring the clock failed: " << strerror(-rc);
    if (wfd_ >= 0) {
      ssize_t w = write(wfd_, "q", 1);
      (void)w;
      close(wfd_);
    }
    if (guard_pid_ > 0) waitpid(guard_pid_, nullptr, 0);
  }
  // Restores; when a PLL offset or an adjtime() slew was still in progress, also
  // waits out the next CLOCK_REALTIME second (+20 ms): the kernel keeps the last
  // second's slew chunk in the tick length until then, and the next test must
  // not inherit it.
  int restore() const {
    ClockState now = read_clock_state();
    bool slewing = now.offset != 0 || now.adjtime_left_us != 0;
    int rc = restore_clock_state_raw(saved_);
    if (rc == 0 && slewing) {
      int64_t rt = clock_ns(CLOCK_REALTIME);
      std::this_thread::sleep_for(std::chrono::nanoseconds(1000000000 - rt % 1000000000 + 20000000));
    }
    return rc;
  }
  const ClockState& saved() const { return saved_; }
  pid_t guard_pid() const { return guard_pid_; }

 private:
  ClockState saved_;
  pid_t guard_pid_ = -1;
  int wfd_ = -1;
};

// One adjustment the Slewer made, on CLOCK_MONOTONIC_RAW (which no adjustment bends).
struct SlewEvent {
  int64_t raw_ns;
  std::string what;
  int64_t real_ns = 0;  // CLOCK_REALTIME just after it (the Slewer's)
};

// What the Slewer does, NTP-client style. Periods are in CLOCK_MONOTONIC_RAW ms.
struct SlewPlan {
  double freq_ppm = 500;  // toggled +freq_ppm / -freq_ppm; 0 = leave the frequency
  int freq_period_ms = 150;
  double tick_pct = 0;  // tick toggled +- this percent of 10000; 0 = leave it
  int tick_period_ms = 230;
  long pll_offset_us = 0;  // one kernel-PLL slew started at pll_at_ms; 0 = none
  int pll_at_ms = 0;
  int64_t step_ns = 0;  // one CLOCK_REALTIME step at step_at_ms; 0 = none
  int step_at_ms = 0;
  long adjtime_us = 0;  // one adjtime() slew started at adjtime_at_ms; 0 = none
  int adjtime_at_ms = 0;

  // Every kind at once, as a machine whose clients fight over the clock would see:
  // frequency toggles, tick toggles, a 3 ms PLL slew at 0.5 s, a -1 s step at 1.5 s.
  static SlewPlan all_kinds() {
    return {.freq_ppm = 500,
            .freq_period_ms = 150,
            .tick_pct = 2,
            .tick_period_ms = 230,
            .pll_offset_us = 3000,
            .pll_at_ms = 500,
            .step_ns = -1000000000,
            .step_at_ms = 1500};
  }
};

// Applies a SlewPlan from a background thread until stop() (or destruction).
class Slewer {
 public:
  explicit Slewer(SlewPlan plan) : plan_(plan), th_([this] { run(); }) {}
  Slewer(const Slewer&) = delete;
  Slewer& operator=(const Slewer&) = delete;
  ~Slewer() { stop(); }
  void stop() {
    stop_ = true;
    if (th_.joinable()) th_.join();
  }
  const std::vector<SlewEvent>& events() const { return events_; }  // after stop()
  int errors() const { return errors_; }

 private:
  void apply(int rc, std::string what) {
    if (rc) errors_++, what += " FAILED: " + std::string(strerror(-rc));
    events_.push_back({clock_ns(CLOCK_MONOTONIC_RAW), what, clock_ns(CLOCK_REALTIME)});
  }
  void run() {
    const int64_t t0 = clock_ns(CLOCK_MONOTONIC_RAW);
    int64_t next_freq = t0, next_tick = t0;
    bool freq_up = true, tick_up = true, pll_done = !plan_.pll_offset_us, step_done = !plan_.step_ns,
         adjtime_done = !plan_.adjtime_us;
    long adjtime_left = 0;
    while (!stop_) {
      int64_t now = clock_ns(CLOCK_MONOTONIC_RAW);
      if (plan_.freq_ppm != 0 && now >= next_freq) {
        double ppm = freq_up ? plan_.freq_ppm : -plan_.freq_ppm;
        apply(set_freq_ppm(ppm), "freq " + std::to_string(ppm) + " ppm");
        freq_up = !freq_up;
        next_freq += int64_t(plan_.freq_period_ms) * 1000000;
      }
      if (plan_.tick_pct != 0 && now >= next_tick) {
        long tick = 10000 + long((tick_up ? 1 : -1) * plan_.tick_pct * 100);
        apply(set_tick(tick), "tick " + std::to_string(tick));
        tick_up = !tick_up;
        next_tick += int64_t(plan_.tick_period_ms) * 1000000;
      }
      if (!pll_done && now >= t0 + int64_t(plan_.pll_at_ms) * 1000000) {
        apply(pll_offset_slew_us(plan_.pll_offset_us), "pll offset " + std::to_string(plan_.pll_offset_us) + " us");
        pll_done = true;
      }
      if (!step_done && now >= t0 + int64_t(plan_.step_at_ms) * 1000000) {
        apply(step_realtime_ns(plan_.step_ns), "realtime step " + std::to_string(plan_.step_ns) + " ns");
        step_done = true;
      }
      if (!adjtime_done && now >= t0 + int64_t(plan_.adjtime_at_ms) * 1000000) {
        apply(adjtime_slew_us(plan_.adjtime_us), "adjtime " + std::to_string(plan_.adjtime_us) + " us");
        adjtime_done = true;
        adjtime_left = plan_.adjtime_us;
      }
      // The kernel's last chunk went in at the REALTIME second just before the
      // slew left reads 0 (polled every 2 ms): the base rate comes back at the next.
      if (adjtime_left != 0 && (adjtime_left = read_adjtime_left_us()) == 0)
        events_.push_back({clock_ns(CLOCK_MONOTONIC_RAW), "adjtime slew's last chunk", clock_ns(CLOCK_REALTIME)});
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  SlewPlan plan_;
  std::atomic<bool> stop_{false};
  std::vector<SlewEvent> events_;
  int errors_ = 0;
  std::thread th_;  // last: starts after every other member is built
};

}  // namespace clockguard
