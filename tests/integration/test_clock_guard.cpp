// The clock guard (tests/clock_guard.h) puts the kernel's NTP state and
// CLOCK_REALTIME - CLOCK_MONOTONIC back after a test slewed and stepped the clock:
// at scope exit, and when the test process is killed with SIGKILL (its guard
// process restores, then exits).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>

#include "clock_guard.h"

namespace {

using namespace clockguard;

#define REQUIRE_ADJTIMEX()                                                                         \
  do {                                                                                             \
    timex probe{};                                                                                 \
    if (geteuid() != 0 || adjtimex(&probe) < 0 || set_freq_ppm(double(probe.freq) / 65536.0) != 0) \
      GTEST_SKIP() << "SKIPPED: needs root with CAP_SYS_TIME to adjust the clock (adjtimex)";      \
  } while (0)

// The restored state equals the saved one: NTP fields exactly, and the REALTIME -
// MONOTONIC difference within the half-widths of the two readings compared here
// plus the restorer's own reading, which is not visible from here (it is made the
// same way, ~0.1 us on this kind of machine; 2 us allows for a preempted VM).
void expect_restored(const ClockState& saved, const ClockState& now) {
  EXPECT_EQ(now.freq, saved.freq);
  EXPECT_EQ(now.tick, saved.tick);
  EXPECT_EQ(now.status, saved.status);
  EXPECT_EQ(now.constant, saved.constant);
  if (saved.offset == 0) {
    EXPECT_EQ(now.offset, 0);
  }
  EXPECT_EQ(now.adjtime_left_us, saved.adjtime_left_us);
  int64_t moved = now.real_mono.diff_ns - saved.real_mono.diff_ns;
  EXPECT_LE(std::llabs(moved), now.real_mono.err_ns + saved.real_mono.err_ns + 2000)
      << "CLOCK_REALTIME - CLOCK_MONOTONIC moved by " << moved << " ns";
}

// Slews and steps the clock in every way the helpers offer.
void disturb() {
  ASSERT_EQ(set_freq_ppm(-321.5), 0);
  ASSERT_EQ(set_tick(10150), 0);
  ASSERT_EQ(step_realtime_ns(-2500000123), 0);  // before the PLL slew: a step clears it
  ASSERT_EQ(pll_offset_slew_us(3000), 0);
  ASSERT_EQ(adjtime_slew_us(1500), 0);  // after the step too, which clears it
}

TEST(ClockGuard, RestoresAtScopeExit) {
  REQUIRE_ADJTIMEX();
  ClockState before = read_clock_state();
  {
    ClockGuard g;
    disturb();
    ClockState mid = read_clock_state();
    EXPECT_NE(mid.freq, before.freq);
    EXPECT_EQ(mid.tick, 10150);
    EXPECT_NE(mid.offset, 0);
    EXPECT_NE(mid.adjtime_left_us, 0);
    EXPECT_LT(mid.real_mono.diff_ns - before.real_mono.diff_ns, -2400000000);
  }
  expect_restored(before, read_clock_state());
}

// A failed assertion returns from the test body; the guard's destructor still runs.
// (EXPECT_NONFATAL_FAILURE cannot see ASSERT_* in a helper, so the failing body runs
// in a lambda whose ASSERT returns early.)
TEST(ClockGuard, RestoresAfterFailedAssertion) {
  REQUIRE_ADJTIMEX();
  ClockState before = read_clock_state();
  EXPECT_FATAL_FAILURE(
      {
        clockguard::ClockGuard g;
        clockguard::set_freq_ppm(250);
        clockguard::set_tick(9900);
        ASSERT_TRUE(false) << "deliberate";
      },
      "deliberate");
  expect_restored(before, read_clock_state());
}

// The test process is SIGKILLed while the clock is slewed and stepped: its guard
// process restores the clock, then exits (reaped here as this test's subreaper).
TEST(ClockGuard, RestoresAfterKill9) {
  REQUIRE_ADJTIMEX();
  ClockState before = read_clock_state();
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    auto* g = new ClockGuard;  // never destroyed: the process is killed
    disturb();
    Slewer s({});  // and a live slewer thread at the kill
    pid_t gp = g->guard_pid();
    ssize_t w = write(fds[1], &gp, sizeof gp);
    (void)w;
    for (;;) pause();
  }
  close(fds[1]);
  pid_t guard = -1;
  ASSERT_EQ(read(fds[0], &guard, sizeof guard), ssize_t(sizeof guard));
  close(fds[0]);
  ASSERT_GT(guard, 0);
  ClockState mid = read_clock_state();
  EXPECT_NE(mid.tick, before.tick);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  // The guard process was reparented to us; it must restore and exit on its own.
  int st = 0;
  pid_t r = 0;
  for (int i = 0; i < 500 && (r = waitpid(guard, &st, WNOHANG)) == 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_EQ(r, guard) << "guard process still running 5 s after its parent was killed";
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "guard process failed to restore the clock";
  expect_restored(before, read_clock_state());
}

// After a normal restore the guard process is gone (reaped by the destructor), and
// it did not touch the clock after the test moved on.
TEST(ClockGuard, GuardProcessDoesNotOutliveNormalExit) {
  REQUIRE_ADJTIMEX();
  ClockState before = read_clock_state();
  pid_t gp;
  {
    ClockGuard g;
    gp = g.guard_pid();
    ASSERT_GT(gp, 0);
    EXPECT_EQ(kill(gp, 0), 0);
    ASSERT_EQ(set_freq_ppm(100), 0);
  }
  errno = 0;
  EXPECT_EQ(kill(gp, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  expect_restored(before, read_clock_state());
}

}  // namespace
