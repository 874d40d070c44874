// TraceTail: a trace copied into place a few hundred bytes at a time, polled
// after each piece, yields exactly the reader's events, each frame once, and
// never a frame that is not whole and verified.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include "synthetic_trace.h"
#include "test_util.h"
#include "trace/trace_reader.h"
#include "trace/trace_tail.h"

using namespace cptrace;
using namespace testutil;

namespace {

SyntheticTrace three_channels() {
  SyntheticTrace t;
  t.channels = {{1, "a"}, {2, "b"}, {3, "c"}};
  t.per_frame = 300;
  for (uint64_t i = 0; i < 5000; ++i) t.add(1 + i % 3, SyntheticTrace::kOrigin + i * 1000, i, uint16_t(i % 2));
  return t;
}

void append(int fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
}

TEST(TraceTail, GrowingFileYieldsEveryFrameOnceAndOnlyWhenComplete) {
  TempDir tmp;
  three_channels().write(tmp / "src");
  std::string whole = read_file(tmp / "src/events.cpt");
  TraceReader r(tmp / "src");
  ASSERT_FALSE(r.error());

  fs::create_directories(tmp / "live");
  int fd = ::open((tmp / "live/events.cpt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  TraceTail tail(tmp / "live/events.cpt");
  std::vector<TraceEvent> got;
  auto collect = [&](const std::vector<TraceEvent>& evs) { got.insert(got.end(), evs.begin(), evs.end()); };
  size_t frames = 0;
  for (size_t at = 0; at < whole.size(); at += 333) {
    append(fd, whole.substr(at, 333));
    frames += tail.poll(collect);
    EXPECT_LE(tail.offset(), std::min(whole.size(), at + 333));
  }
  EXPECT_EQ(tail.offset(), whole.size());
  EXPECT_EQ(tail.pending_reason(), "");
  EXPECT_EQ(frames, r.frame_count());
  EXPECT_EQ(got, r.events()) << "events differ from the reader's (TSC-stamped: no conversion)";
  EXPECT_EQ(tail.clock(), r.clock());
  EXPECT_EQ(tail.counters().seen, r.counters().seen);
  EXPECT_EQ(tail.channels().size(), 3u);
  EXPECT_EQ(channel_label(tail.channels(), 2), "b");
  ::close(fd);
}

// A whole frame whose CRC does not verify yet (a writev seen half done) is left
// for the next poll, and read once its bytes are right.
TEST(TraceTail, UnverifiedLastFrameIsReadLater) {
  TempDir tmp;
  three_channels().write(tmp / "src");
  std::string whole = read_file(tmp / "src/events.cpt");
  TraceReader r(tmp / "src");
  std::string broken = whole;
  broken.back() ^= 0x5a;  // the last frame (Counters)
  fs::create_directories(tmp / "live");
  int fd = ::open((tmp / "live/events.cpt").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  append(fd, broken);
  TraceTail tail(tmp / "live/events.cpt");
  size_t n = 0;
  auto count = [&](const std::vector<TraceEvent>& evs) { n += evs.size(); };
  EXPECT_EQ(tail.poll(count), r.frame_count() - 1);
  EXPECT_EQ(tail.pending_reason(), "frame CRC does not verify");
  EXPECT_FALSE(tail.has_counters());
  EXPECT_LT(tail.offset(), whole.size());
  ASSERT_EQ(::pwrite(fd, &whole.back(), 1, off_t(whole.size() - 1)), 1);
  EXPECT_EQ(tail.poll(count), 1u);
  EXPECT_TRUE(tail.has_counters());
  EXPECT_EQ(tail.offset(), whole.size());
  EXPECT_EQ(n, r.event_count());
  ::close(fd);
}

}  // namespace
