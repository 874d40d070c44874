// os/stop_signals: a signal becomes a request to stop, and the dispositions in
// place before come back.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include <atomic>
#include <stdexcept>

#include "os/stop_signals.h"

using cptrace::StopSignals;

namespace {

std::atomic<int> g_earlier{0};
void earlier_handler(int sig) { g_earlier = sig; }

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// A handler of the caller's own, as a program embedding a stage would have.
struct EarlierHandler {
  struct sigaction old_int {
  }, old_term{};
  EarlierHandler() {
    struct sigaction sa {};
    sa.sa_handler = earlier_handler;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    g_earlier = 0;
  }
  ~EarlierHandler() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

}  // namespace

TEST(StopSignals, ASignalSetsTheFlagWakesThePollAndIsKept) {
  EarlierHandler earlier;
  std::atomic<bool> flag{false};
  StopSignals s(&flag);
  EXPECT_EQ(s.signal(), 0);
  EXPECT_FALSE(readable(s.wake_fd()));
  EXPECT_EQ(s.wait(0), 0);
  raise(SIGTERM);
  EXPECT_EQ(s.signal(), SIGTERM);
  EXPECT_TRUE(flag.load());
  EXPECT_TRUE(readable(s.wake_fd()));
  EXPECT_EQ(s.wait(-1), SIGTERM);  // returns at once: no sleep after the signal came
  raise(SIGINT);  // a second one: the first is what the caller reports
  EXPECT_EQ(s.signal(), SIGTERM);
  EXPECT_EQ(g_earlier.load(), 0);  // the earlier handler did not run while the scope lived
}

TEST(StopSignals, TheEarlierHandlersComeBack) {
  EarlierHandler earlier;
  { StopSignals s; }
  raise(SIGINT);
  EXPECT_EQ(g_earlier.load(), SIGINT);
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, earlier_handler);
}

TEST(StopSignals, OneAtATime) {
  StopSignals s;
  EXPECT_THROW(StopSignals second, std::logic_error);
  EXPECT_EQ(s.signal(), 0);  // the refused one changed nothing
}

TEST(StopSignals, AFreshScopeStartsWithoutASignal) {
  EarlierHandler earlier;
  {
    StopSignals s;
    raise(SIGINT);
    EXPECT_EQ(s.signal(), SIGINT);
  }
  StopSignals again;
  EXPECT_EQ(again.signal(), 0);
  EXPECT_FALSE(readable(again.wake_fd()));
}
