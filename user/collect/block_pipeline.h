// Collector back half: fixed-size blocks of decoded events travel through
// blocking queues to compression threads and then, in order, to one writer.
//
//   producer(s) --submit()--> [ready queue] --> N compressor threads
//        --> [done queue] --> writer thread (reorders by sequence) --> TraceWriter
//
// Blocks are recycled through a free list, so steady state allocates nothing.
// The list starts with `blocks_in_flight` blocks, touched at construction, and
// grows on demand up to `max_blocks`: a compressor or the writer that stalls
// (descheduled by a build, a write() held by dirty-page throttling) must not
// make the producer, the ring drain, wait while memory is left, for the rings
// behind it hold only tens of ms at tens of M events/s. A grower thread adds
// blocks ahead of need (woken by acquire() when fewer than half the initial
// blocks are free), so the drain rarely faults one in itself. After a burst
// the same thread gives the memory back: once the blocks in use have stayed
// below half of those made for a quiet period, the free blocks beyond twice
// that use (never below the initial count) are emptied and their pages
// returned to the system, so the recorder's RSS falls back to its steady size.
// Every idle thread sleeps on its queue's condition variable: no stage polls,
// because on a machine with few CPUs each cycle a recorder thread spends
// looking for work is taken from the traced application. A queue operation
// happens once per block (thousands of events), so a mutex costs nothing
// measurable. When every block up to the cap is in flight the producer waits (backpressure):
// the kernel rings then fill and their drops are counted there — nothing is
// lost without being counted.
//
// When the sink throws (disk full, I/O error) the pipeline stops writing but
// keeps consuming: every later block is discarded and its events counted in
// discarded(), so the recorder can count them as dropped and stop cleanly.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trace/block_codec.h"
#include "trace/trace_format.h"

namespace cptrace {

struct Block {
  uint64_t seq = 0;
  RecordedEvents events;  // events of an Events2 block
  EncodedFrame frame;  // compressor output, or a ready control frame
  bool precoded = false;  // frame is already encoded (clock, channels, counters)
};

struct PipelineStats {
  std::atomic<uint64_t> events{0};  // events written
  std::atomic<uint64_t> raw_bytes{0};  // events * sizeof(TraceEvent)
  std::atomic<uint64_t> frame_bytes{0};  // bytes written, headers included
  // Stall counters (always on, a few atomics per block): what the collector
  // waited for and how deep its queues got, for meta.json "collector".
  std::atomic<uint64_t> producer_waits{0};  // acquire() found no free block at the cap
  std::atomic<uint64_t> producer_wait_ns{0}, max_producer_wait_ns{0};
  std::atomic<uint64_t> blocks_grown{0};  // added beyond the initial blocks
  std::atomic<uint64_t> blocks_released{0};  // emptied after a quiet period (memory returned)
  std::atomic<uint64_t> grown_by_producer{0};  // of those, faulted in by acquire() itself
  std::atomic<uint64_t> blocks_peak{0};  // most blocks out of the free list at once
  std::atomic<uint64_t> ready_peak{0};  // deepest queue before the compressors
  std::atomic<uint64_t> done_peak{0};  // deepest queue before the writer
  std::atomic<uint64_t> max_compress_ns{0};
  std::atomic<uint64_t> fast_frames{0};  // Events frames written at the fast level (set_fast_level)
  std::atomic<uint64_t> write_ns{0}, max_write_ns{0};  // in the sink (write())
};

// Raises `m` to `v` if smaller (relaxed: figures, not synchronization).
inline void note_max(std::atomic<uint64_t>& m, uint64_t v) {
  uint64_t cur = m.load(std::memory_order_relaxed);
  while (v > cur && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// What a failed sink cost: events of the blocks not written, by the CPU that
// produced them (TraceEvent::cpu), and the records of precoded Net frames.
struct DiscardedRecords {
  std::vector<uint64_t> events_per_cpu;  // User and ChannelClose events
  std::vector<uint64_t> series_per_cpu;  // events counted by lost `counter` series points
  uint64_t series_points = 0;  // Count records lost
  uint64_t net_events = 0;
  uint64_t events() const;
};

// The first exception the sink threw.
struct SinkFailure {
  std::string what;
  int error = 0;  // errno value when it was a std::system_error, else 0
};

// A FIFO of blocks whose consumers sleep until a block or close() arrives.
// Its capacity is the pipeline's largest block count, so push() never waits.
class BlockQueue {
 public:
  explicit BlockQueue(size_t capacity) : ring_(capacity) {}
  // Returns the queue's depth after the push.
  size_t push(Block* b);
  // The oldest block; waits for one. False once closed and empty. *waited:
  // set when the call had to sleep.
  bool pop(Block*& b, bool* waited = nullptr);
  // The oldest block if there is one, without waiting; *left: how many remain.
  bool try_pop(Block*& b, size_t* left = nullptr);
  size_t size();
  // Wakes every waiter; pop() still returns what is queued.
  void close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Block*> ring_;
  size_t head_ = 0, count_ = 0;
  bool closed_ = false;
};

class BlockPipeline {
 public:
  // `sink` is called by the single writer thread, in sequence order.
  using Sink = std::function<void(const EncodedFrame&)>;
  // blocks_in_flight: blocks made at once; max_blocks (0: the same) the most
  // the free list may grow to.
  BlockPipeline(Sink sink, size_t block_events = 16384, unsigned compressors = 1, size_t blocks_in_flight = 64,
                int zstd_level = 1, size_t max_blocks = 0);
  ~BlockPipeline();
  BlockPipeline(const BlockPipeline&) = delete;
  BlockPipeline& operator=(const BlockPipeline&) = delete;

  // A block to fill: a free one, else a new one below the cap, else waits for
  // a free one. Thread-safe.
  Block* acquire();
  // Hands a filled block (events) or a precoded frame on. Sequence numbers are
  // assigned here, so the file order is the submission order. Thread-safe.
  void submit(Block* b);
  void submit_frame(EncodedFrame f);
  // Returns an acquired block that will not be submitted.
  void give_back(Block* b);
  // Waits until everything submitted so far is written, then stops the threads.
  void finish();

  size_t block_events() const { return block_events_; }
  size_t max_blocks() const { return max_blocks_; }
  // Blocks holding memory now: the initial ones and those grown, less those
  // released after a burst.
  size_t blocks() const { return allocated_.load(std::memory_order_relaxed); }
  // How long the blocks in use must stay low before the grower releases the
  // surplus (default kReleaseAfterMs; 0: never). Call before the first acquire().
  void set_release_after_ms(uint64_t ms) { release_after_ms_.store(ms, std::memory_order_relaxed); }
  static constexpr uint64_t kReleaseAfterMs = 10000;
  // Events frames at `level` instead of the pipeline's zstd level while a
  // compressor is busy more than kFastAbovePct of the wall time (over windows
  // of kBusyWindowMs), back once below kSlowBelowPct. Call before the first
  // submit(); never called: the pipeline's level always.
  void set_fast_level(int level) {
    fast_level_.store(level, std::memory_order_relaxed);
    adaptive_.store(true, std::memory_order_release);
  }
  static constexpr uint64_t kBusyWindowMs = 250, kFastAbovePct = 20, kSlowBelowPct = 10;
  const PipelineStats& stats() const { return stats_; }
  // True once the sink threw; nothing is written after that. Thread-safe.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Valid once failed() is true.
  const SinkFailure& failure() const { return failure_; }
  // Complete after finish().
  const DiscardedRecords& discarded() const { return discarded_; }

 private:
  void compress_loop();
  void write_loop();
  void write_block(Block* b);
  void discard_block(const Block* b);
  // A new block, its pages touched, or nullptr at the cap.
  Block* grow();
  // Adds blocks to the free list up to `target` free ones (off the producer).
  void top_up(size_t target);
  void grow_loop();
  // One look of the grower at the use of the last interval; releases the
  // surplus once a whole quiet period has passed.
  void release_idle();

  Sink sink_;
  size_t block_events_;
  int zstd_level_;
  std::atomic<int> fast_level_{0};
  std::atomic<bool> adaptive_{false};
  size_t max_blocks_;
  size_t low_water_;  // acquire() wakes the grower below this many free blocks
  std::mutex grow_mu_;
  std::mutex grow_wait_mu_;  // the grower's sleep
  std::condition_variable grow_cv_;
  std::atomic<bool> grow_wanted_{false};
  bool grow_stop_ = false;  // under grow_wait_mu_
  std::thread grower_;
  std::deque<Block> storage_;  // deque: growing keeps every Block* valid
  std::vector<Block*> hollow_;  // released blocks (no memory), under grow_mu_
  size_t initial_blocks_;
  std::atomic<size_t> allocated_{0};  // blocks with memory, under grow_mu_ when changed
  std::atomic<uint64_t> release_after_ms_{kReleaseAfterMs};
  std::atomic<uint64_t> interval_peak_{0};  // most blocks in use since the grower last looked
  std::vector<size_t> interval_peaks_;  // the grower's: the last quiet period's looks
  std::atomic<size_t> in_use_{0};  // acquired and not yet given back
  BlockQueue free_, ready_, done_;
  std::mutex submit_mu_;  // a sequence number and its place in ready_ go together
  uint64_t next_seq_ = 0;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> compressors_;
  std::thread writer_;
  PipelineStats stats_;
  std::atomic<bool> failed_{false};
  SinkFailure failure_;  // written by the writer thread before failed_
  DiscardedRecords discarded_;  // writer thread only until finish()
};

}  // namespace cptrace
