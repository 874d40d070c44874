// The block pipeline under many producers: every event submitted comes out of
// the writer exactly once, each producer's blocks in submission order.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <iterator>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include "collect/block_pipeline.h"
#include "collect/ring_drain.h"
#include "record/recorder.h"

using namespace cptrace;

TEST(BlockPipeline, ManyProducersNothingLostOrderKept) {
  constexpr int kProducers = 8, kBlocks = 300;
  constexpr size_t kBlockEvents = 1000;
  std::vector<TraceEvent> out;
  std::vector<uint64_t> frame_first_tuple;
  BlockPipeline pipe(
      [&](const EncodedFrame& f) {  // single writer thread: no lock needed
        auto ev = decode_events(f.hdr, f.payload.data(), f.payload.size());
        out.insert(out.end(), ev.begin(), ev.end());
      },
      kBlockEvents, /*compressors=*/3, /*blocks_in_flight=*/16);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (int b = 0; b < kBlocks; ++b) {
        Block* blk = pipe.acquire();
        for (size_t i = 0; i < kBlockEvents; ++i) {
          TraceEvent e;
          e.tid = p;
          e.tuple = uint64_t(b) * kBlockEvents + i;
          e.ts = e.tuple * 7;
          e.kind = uint8_t(EventKind::User);
          blk->events.push_back(e);
        }
        pipe.submit(blk);
      }
    });
  for (auto& t : producers) t.join();
  pipe.finish();

  ASSERT_EQ(out.size(), size_t(kProducers) * kBlocks * kBlockEvents);
  std::vector<int64_t> last(kProducers, -1);
  for (const auto& e : out) {
    ASSERT_LT(e.tid, uint32_t(kProducers));
    // Per producer, events come out in exactly the order they went in.
    ASSERT_EQ(int64_t(e.tuple), last[e.tid] + 1) << "producer " << e.tid;
    last[e.tid] = e.tuple;
  }
  EXPECT_EQ(pipe.stats().events.load(), out.size());
}

TEST(BlockPipeline, PrecodedFramesKeepSubmissionOrder) {
  std::vector<uint16_t> types;
  BlockPipeline pipe([&](const EncodedFrame& f) { types.push_back(f.hdr.type); }, 10, 2, 4);
  for (int i = 0; i < 100; ++i) {
    if (i % 2)
      pipe.submit_frame(encode_clock({ClockPoint{uint64_t(i), uint64_t(i), 1, 0}}));
    else {
      Block* b = pipe.acquire();
      b->events.assign_zeros(3);
      pipe.submit(b);
    }
  }
  pipe.finish();
  ASSERT_EQ(types.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(types[i], uint16_t(i % 2 ? FrameType::Clock2 : FrameType::Events2)) << i;
}

// A sink that fails (disk full) stops the writing, never the producers: every
// event of the blocks not written is counted once, by CPU, series points apart.
TEST(BlockPipeline, FailingSinkCountsEveryEventNotWritten) {
  constexpr int kBlocks = 200, kFailAt = 37;
  constexpr size_t kBlockEvents = 50;
  int calls = 0;
  uint64_t written = 0;
  BlockPipeline pipe(
      [&](const EncodedFrame& f) {
        if (++calls == kFailAt) throw std::system_error(ENOSPC, std::generic_category(), "cannot write x");
        if (f.hdr.type == uint16_t(FrameType::Events2)) written += f.hdr.count;
      },
      kBlockEvents, /*compressors=*/2, /*blocks_in_flight=*/8);
  uint64_t submitted = 0, series = 0, net = 0;
  for (int b = 0; b < kBlocks; ++b) {
    if (b % 10 == 5) {  // a precoded network frame of 4 records now and then
      EncodedFrame f;
      f.hdr.type = uint16_t(FrameType::Net);
      f.hdr.count = 4;
      net += 4;
      pipe.submit_frame(std::move(f));
      continue;
    }
    Block* blk = pipe.acquire();
    for (size_t i = 0; i < kBlockEvents; ++i) {
      TraceEvent e;
      e.cpu = uint16_t(i % 3);
      e.kind = uint8_t(i == 0 ? EventKind::Count : EventKind::User);
      e.tuple = i == 0 ? 5 : i;  // a series point counting 5 events
      blk->events.push_back(e);
    }
    submitted += kBlockEvents - 1;
    series++;
    pipe.submit(blk);
  }
  pipe.finish();
  ASSERT_TRUE(pipe.failed());
  EXPECT_EQ(pipe.failure().error, ENOSPC);
  EXPECT_NE(pipe.failure().what.find("cannot write x"), std::string::npos);
  EXPECT_EQ(calls, kFailAt) << "the sink was called again after it failed";
  const DiscardedRecords& d = pipe.discarded();
  // Blocks 0..kFailAt-2 were written (frame kFailAt-1 is block kFailAt-1: an events block).
  uint64_t written_blocks = 0;
  for (int b = 0; b < kFailAt - 1; ++b) written_blocks += b % 10 != 5;
  EXPECT_EQ(written, written_blocks * kBlockEvents);
  EXPECT_EQ(d.events() + written - written_blocks, submitted) << "events lost without being counted";
  EXPECT_EQ(d.series_points, series - written_blocks);
  ASSERT_EQ(d.series_per_cpu.size(), 1u);  // every series point was on CPU 0
  EXPECT_EQ(d.series_per_cpu[0], 5 * d.series_points);
  ASSERT_EQ(d.events_per_cpu.size(), 3u);
  uint64_t net_written = 0;
  for (int b = 0; b < kFailAt - 1; ++b) net_written += b % 10 == 5 ? 4 : 0;
  EXPECT_EQ(d.net_events, net - net_written);
}

TEST(RingDrain, DecodesEveryRecordKind) {
  std::vector<TraceEvent> out;
  ChannelInfo ch;
  cp_event_rec ev{};
  ev.h = {CP_REC_EVENT, 3, 100, 101, 0};
  ev.tsc = 5;
  ev.channel = 9;
  ev.tuple = 42;
  ASSERT_EQ(RingDrain::decode(&ev, sizeof ev, out, &ch), 1);
  EXPECT_EQ(out[0].ts, 5u);
  EXPECT_EQ(out[0].timebase, uint8_t(Timebase::Tsc));  // the site's stamp
  EXPECT_EQ(out[0].cpu, 3);
  EXPECT_EQ(out[0].pid, 100u);
  EXPECT_EQ(out[0].tid, 101u);

  auto batch = std::make_unique<cp_batch_rec>();
  batch->h = {CP_REC_BATCH, 1, 7, 8, 3};
  for (int i = 0; i < 3; ++i) batch->e[i] = {uint64_t(1000 + i), 2, uint64_t(i)};
  out.clear();
  ASSERT_EQ(RingDrain::decode(batch.get(), sizeof *batch, out, &ch), 3);
  EXPECT_EQ(out[2].ts, 1002u);
  EXPECT_EQ(out[2].timebase, uint8_t(Timebase::Tsc));
  // Every entry stamped on CPU 5's TSC: the events name that CPU, not the probe's.
  batch->h.kind = CP_REC_BATCH_CPU;
  batch->h.cpu = 5;
  out.clear();
  ASSERT_EQ(RingDrain::decode(batch.get(), sizeof *batch, out, &ch), 3);
  for (const TraceEvent& e : out) {
    EXPECT_EQ(e.timebase, uint8_t(Timebase::TscOnCpu));
    EXPECT_EQ(e.cpu, 5);
  }
  batch->h.n = CP_BATCH_MAX + 1;  // corrupt count: refused, nothing decoded
  out.clear();
  EXPECT_LT(RingDrain::decode(batch.get(), sizeof *batch, out, &ch), 0);
  EXPECT_TRUE(out.empty());

  // Staged single events: each entry keeps its own thread, the header's pid is
  // whoever handed them over.
  cp_singles_rec st{};
  st.h = {CP_REC_SINGLES, 1, 999, 999, 2};
  st.e[0] = {10, 4, 40, 300, 301};
  st.e[1] = {11, 5, 41, 302, 303};
  out.clear();
  ASSERT_EQ(RingDrain::decode(&st, sizeof st, out, &ch), 2);
  EXPECT_EQ(out[1].ts, 11u);
  EXPECT_EQ(out[1].channel, 5u);
  EXPECT_EQ(out[1].tuple, 41u);
  EXPECT_EQ(out[0].pid, 300u);
  EXPECT_EQ(out[1].tid, 303u);
  EXPECT_EQ(out[1].cpu, 1);
  EXPECT_EQ(out[1].timebase, uint8_t(Timebase::Tsc));
  st.h.n = CP_STAGE_MAX + 1;  // corrupt count: refused
  out.clear();
  EXPECT_LT(RingDrain::decode(&st, sizeof st, out, &ch), 0);
  EXPECT_TRUE(out.empty());

  cp_channel_rec c{};
  c.h = {CP_REC_CHANNEL, 0, 55, 56, 0};
  c.channel = 77;
  strcpy(c.name, "ingest");
  ASSERT_EQ(RingDrain::decode(&c, sizeof c, out, &ch), 0);
  EXPECT_EQ(ch.name, "ingest");
  EXPECT_EQ(ch.id, 77u);
  EXPECT_LT(RingDrain::decode(&c, 4, out, &ch), 0);  // short record
}

namespace {

// Context switches of every thread of this process but the caller: a thread
// that polls (yield, short sleeps) switches thousands of times a second, one
// asleep on a condition variable or in epoll_wait not at all.
uint64_t other_threads_switches() {
  uint64_t total = 0;
  pid_t self = gettid();
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    if (t.path().filename() == std::to_string(self)) continue;
    std::ifstream f(t.path() / "status");
    for (std::string line; std::getline(f, line);)
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0 || line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
        total += std::stoull(line.substr(line.find(':') + 1));
  }
  return total;
}

}  // namespace

TEST(BlockPipeline, IdleThreadsSleep) {
  std::atomic<int> frames{0};
  BlockPipeline pipe([&](const EncodedFrame&) { frames++; }, 100, /*compressors=*/2, 4);
  Block* b = pipe.acquire();  // one block through, so every thread has run
  b->events.assign_zeros(3);
  pipe.submit(b);
  while (frames.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the writer settles
  uint64_t before = other_threads_switches();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(other_threads_switches() - before, 2u) << "an idle pipeline thread keeps waking up";
  pipe.finish();
  EXPECT_EQ(frames.load(), 1);
}

TEST(RingDrain, IdleDrainSleepsUntilWoken) {
  int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "idle_ring", 0, 0, 1 << 16, nullptr);
  ASSERT_GE(fd, 0) << "creating a BPF ring buffer needs root: " << strerror(errno);
  std::atomic<int> frames{0};
  {
    BlockPipeline pipe([&](const EncodedFrame&) { frames++; }, 1024, 1, 4);
    RingDrain drain({fd}, pipe, nullptr);
    drain.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    uint64_t before = other_threads_switches();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_LE(other_threads_switches() - before, 2u) << "an idle drain keeps waking up";
    drain.request_flush();  // nothing to flush: no frame
    drain.stop_and_flush();
    pipe.finish();
  }
  EXPECT_EQ(frames.load(), 0);
  close(fd);
}

namespace {

// A sink that holds every write until released: a disk stalled in write().
struct HeldSink {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  uint64_t events = 0;
  void operator()(const EncodedFrame& f) {
    std::unique_lock lk(mu);
    cv.wait(lk, [this] { return released; });
    events += f.hdr.count;
  }
  void release() {
    {
      std::lock_guard lk(mu);
      released = true;
    }
    cv.notify_all();
  }
};

// Fills and submits a block of n events.
void submit_block(BlockPipeline& pipe, size_t n) {
  Block* b = pipe.acquire();
  b->events.assign_zeros(n);
  pipe.submit(b);
}

// The state letter of one of this process's threads (/proc/self/task/TID/stat).
char thread_state(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = s.rfind(')');
  return close == std::string::npos || close + 2 >= s.size() ? '?' : s[close + 2];
}

}  // namespace

// A writer stalled in write() does not make the producer (the ring drain)
// wait while the block pool may still grow: blocks are added instead, and
// every event is written once the writer resumes.
TEST(BlockPipeline, StalledWriterDoesNotStallTheProducerBelowTheCap) {
  HeldSink sink;
  constexpr size_t kEvents = 100;
  constexpr int kBlocks = 40;
  BlockPipeline pipe([&](const EncodedFrame& f) { sink(f); }, kEvents, 1, /*blocks_in_flight=*/4, 1,
                     /*max_blocks=*/64);
  for (int i = 0; i < kBlocks; ++i) submit_block(pipe, kEvents);  // would hang at block 5 with a fixed pool
  EXPECT_EQ(pipe.stats().producer_waits.load(), 0u);
  EXPECT_GE(pipe.blocks(), size_t(kBlocks));
  EXPECT_LE(pipe.blocks(), pipe.max_blocks());
  EXPECT_GE(pipe.stats().blocks_peak.load(), uint64_t(kBlocks - 1));  // the stalled writer holds them
  sink.release();
  pipe.finish();
  EXPECT_EQ(sink.events, kBlocks * kEvents);
  EXPECT_EQ(pipe.stats().events.load(), kBlocks * kEvents);
}

// At the cap the producer waits (backpressure: the kernel rings then count
// their drops), the wait is counted, the pool stays at its cap, and nothing
// is lost once the writer resumes.
TEST(BlockPipeline, StalledWriterAtTheCapMakesTheProducerWaitAndCountsIt) {
  HeldSink sink;
  constexpr size_t kEvents = 100, kCap = 8;
  BlockPipeline pipe([&](const EncodedFrame& f) { sink(f); }, kEvents, 1, /*blocks_in_flight=*/2, 1, kCap);
  for (size_t i = 0; i < kCap; ++i) submit_block(pipe, kEvents);
  EXPECT_EQ(pipe.blocks(), kCap);
  // Filling the pool may already have waited an instant, for a block the grower
  // had made but not yet freed: only the wait at the cap is this test's.
  const uint64_t waits_before = pipe.stats().producer_waits.load();
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
  std::thread producer([&] {
    tid = gettid();
    submit_block(pipe, kEvents);  // no block is free until the sink is released
    done = true;
  });
  while (!tid.load()) std::this_thread::yield();
  while (thread_state(tid.load()) != 'S') std::this_thread::yield();  // asleep in acquire()
  EXPECT_FALSE(done.load()) << "a block beyond the cap was handed out";
  sink.release();
  producer.join();
  pipe.finish();
  EXPECT_EQ(pipe.stats().producer_waits.load(), waits_before + 1);
  EXPECT_EQ(pipe.blocks(), kCap);
  EXPECT_EQ(pipe.stats().blocks_grown.load(), kCap - 2);
  EXPECT_EQ(sink.events, (kCap + 1) * kEvents);
}

namespace {
uint64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

// Bytes malloc has handed out and not had back, all arenas and mmaps.
uint64_t malloc_in_use() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}
}  // namespace

// After a burst (a stalled writer made the pool grow) and a quiet period, the
// grower empties the blocks beyond the initial ones and their pages leave the
// process: the recorder does not keep a burst's memory. A later burst grows
// the pool again and nothing is lost.
TEST(BlockPipeline, PoolReleasesABurstsBlocksAfterAQuietPeriod) {
  HeldSink sink;
  constexpr size_t kEvents = 16384, kInitial = 4;
  constexpr int kBlocks = 40;
  const uint64_t block_bytes = kEvents * (3 * 8 + 2 * 4 + 2 + 1 + 1);
  BlockPipeline pipe([&](const EncodedFrame& f) { sink(f); }, kEvents, 1, kInitial, 1, /*max_blocks=*/64);
  pipe.set_release_after_ms(200);
  for (int i = 0; i < kBlocks; ++i) submit_block(pipe, kEvents);
  ASSERT_GE(pipe.blocks(), size_t(kBlocks));
  EXPECT_EQ(pipe.stats().blocks_released.load(), 0u) << "blocks in use were released";
  const uint64_t grown_rss = resident_bytes(), grown_heap = malloc_in_use();
  const size_t grown = pipe.blocks();
  sink.release();
  // Waits on the pool's state; a grower that never releases hangs here and
  // the test runner's timeout reports it.
  while (pipe.blocks() > kInitial) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(pipe.stats().blocks_released.load(), pipe.stats().blocks_grown.load());  // back to the initial blocks
  const uint64_t released_rss = resident_bytes(), released_heap = malloc_in_use();
  const uint64_t released_bytes = (grown - kInitial) * block_bytes;
  // Every emptied block's columns go back to malloc...
  EXPECT_LT(released_heap + released_bytes * 9 / 10, grown_heap)
      << "malloc'd " << grown_heap << " -> " << released_heap << " bytes, released " << released_bytes;
  // ...and their pages to the system. Only part is asserted: pages that share
  // a malloc chunk with memory still in use stay (about half at worst seen
  // here, where earlier tests left the heap fragmented; all of it alone).
  EXPECT_LT(released_rss + released_bytes / 3, grown_rss)
      << "RSS " << grown_rss << " -> " << released_rss << " bytes, released " << released_bytes;
  for (int i = 0; i < kBlocks; ++i) submit_block(pipe, kEvents);  // grows again from the emptied shells
  pipe.finish();
  EXPECT_EQ(sink.events, 2 * kBlocks * kEvents);
  EXPECT_EQ(pipe.stats().events.load(), 2 * kBlocks * kEvents);
}

// The drain's stall counters know each ring's size and count its passes (a
// flush request is one), so meta.json "collector" can say how full a ring got.
TEST(RingDrain, StatsNameTheRingSizeAndCountPasses) {
  int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "stats_ring", 0, 0, 1 << 18, nullptr);
  ASSERT_GE(fd, 0) << "creating a BPF ring buffer needs root: " << strerror(errno);
  {
    BlockPipeline pipe([](const EncodedFrame&) {}, 1024, 1, 4);
    RingDrain drain({fd}, pipe, nullptr);
    drain.set_drop_counter([] { return uint64_t(0); });
    drain.start();
    drain.request_flush();
    drain.stop_and_flush();
    pipe.finish();
    EXPECT_EQ(drain.stats().ring_bytes, uint64_t(1) << 18);
    EXPECT_EQ(drain.stats().ring_peak_bytes, 0u);  // nothing was ever written
    EXPECT_GE(drain.stats().passes, 1u);
    EXPECT_TRUE(drain.stats().drop_passes.empty());
  }
  close(fd);
}

// Without --ring-mb the ring is a power of two from the former 16 MiB up to 64.
TEST(RecordDefaults, RingSizedByMemoryWithinBounds) {
  uint32_t mb = default_ring_mb();
  EXPECT_GE(mb, 16u);
  EXPECT_LE(mb, 64u);
  EXPECT_EQ(mb & (mb - 1), 0u) << mb;
}

namespace {

// Event i of block b, shaped like a batch recording (one thread per block, a
// few channels, rising stamps and tuples).
TraceEvent busy_event(uint64_t b, uint64_t i) {
  TraceEvent e;
  e.ts = (b << 24) + i * 37 + (i * i) % 11;
  e.channel = 0x9e3779b97f4a7c15ull * (1 + i / 256 % 3);
  e.tuple = (b << 20) + i;
  e.pid = 4242;
  e.tid = 4242 + uint32_t(b % 4);
  e.cpu = uint16_t(b % 2);
  e.kind = uint8_t(EventKind::User);
  return e;
}

// Blocks submitted back to back (copies of four made beforehand, so the
// producer outruns the compressor even on a crowded machine) keep the
// compressor busy all the time; the producer stops `more` blocks after the
// first one written at the fast level (or after `cap` blocks). Block b holds
// busy_event(b % 4, i).
struct BusyRun {
  uint64_t blocks = 0, fast_frames = 0, mismatched = 0, events_out = 0;
};
BusyRun run_busy(bool adaptive, uint64_t more, uint64_t cap) {
  constexpr size_t kBlockEvents = 16384;
  BusyRun r;
  uint64_t next_block = 0;
  BlockPipeline pipe(
      [&](const EncodedFrame& f) {  // the writer thread, blocks in order
        auto ev = decode_events(f.hdr, f.payload.data(), f.payload.size());
        for (size_t i = 0; i < ev.size(); ++i) r.mismatched += !(ev[i] == busy_event(next_block % 4, i));
        r.events_out += ev.size();
        ++next_block;
      },
      kBlockEvents, /*compressors=*/1, /*blocks_in_flight=*/32, /*zstd_level=*/1);
  if (adaptive) pipe.set_fast_level(-5);
  std::vector<RecordedEvents> made(4);
  for (uint64_t b = 0; b < 4; ++b)
    for (size_t i = 0; i < kBlockEvents; ++i) made[b].push_back(busy_event(b, i));
  uint64_t after_fast = 0;
  for (; r.blocks < cap && after_fast < more; ++r.blocks) {
    Block* blk = pipe.acquire();
    blk->events = made[r.blocks % 4];
    pipe.submit(blk);
    after_fast += pipe.stats().fast_frames.load() > 0;
  }
  pipe.finish();
  r.fast_frames = pipe.stats().fast_frames.load();
  return r;
}

}  // namespace

// A compressor busy all the time switches to the fast level after its first
// window (and a pipeline never told of a fast level does not): every event of
// every frame, at either level, decodes to exactly what was submitted.
TEST(BlockPipeline, BusyCompressorSwitchesToTheFastLevelAndEveryEventReadsBack) {
  BusyRun fast = run_busy(true, 16, 100000);
  EXPECT_GT(fast.fast_frames, 0u);
  EXPECT_LT(fast.fast_frames, fast.blocks) << "the first window is at the pipeline's level";
  EXPECT_EQ(fast.events_out, fast.blocks * 16384);
  EXPECT_EQ(fast.mismatched, 0u);

  BusyRun fixed = run_busy(false, 1, 64);
  EXPECT_EQ(fixed.fast_frames, 0u);
  EXPECT_EQ(fixed.events_out, fixed.blocks * 16384);
  EXPECT_EQ(fixed.mismatched, 0u);
}
