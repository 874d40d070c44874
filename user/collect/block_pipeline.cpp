#include "collect/block_pipeline.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <numeric>
#include <system_error>

namespace cptrace {

size_t BlockQueue::push(Block* b) {
  size_t depth;
  {
    std::lock_guard lk(mu_);
    ring_[(head_ + count_++) % ring_.size()] = b;
    depth = count_;
  }
  cv_.notify_one();
  return depth;
}

bool BlockQueue::try_pop(Block*& b, size_t* left) {
  std::lock_guard lk(mu_);
  if (count_ == 0) return false;
  b = ring_[head_];
  head_ = (head_ + 1) % ring_.size();
  count_--;
  if (left) *left = count_;
  return true;
}

size_t BlockQueue::size() {
  std::lock_guard lk(mu_);
  return count_;
}

bool BlockQueue::pop(Block*& b, bool* waited) {
  std::unique_lock lk(mu_);
  if (waited) *waited = count_ == 0 && !closed_;
  cv_.wait(lk, [this] { return count_ > 0 || closed_; });
  if (count_ == 0) return false;
  b = ring_[head_];
  head_ = (head_ + 1) % ring_.size();
  count_--;
  return true;
}

void BlockQueue::close() {
  {
    std::lock_guard lk(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

namespace {
uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

BlockPipeline::BlockPipeline(Sink sink, size_t block_events, unsigned compressors, size_t blocks_in_flight,
                             int zstd_level, size_t max_blocks)
    : sink_(std::move(sink)),
      block_events_(block_events),
      zstd_level_(zstd_level),
      max_blocks_(std::max(max_blocks, blocks_in_flight)),
      low_water_(std::max<size_t>(2, blocks_in_flight / 2)),
      initial_blocks_(blocks_in_flight),
      free_(max_blocks_),
      ready_(max_blocks_),
      done_(max_blocks_) {
  // Touched now, not when the first events arrive: first-touch page faults of
  // tens of MB cost the drain so much time that the rings overflow in the
  // first second of a fast recording.
  for (size_t i = 0; i < blocks_in_flight; ++i) free_.push(grow());
  stats_.blocks_grown = 0;
  for (unsigned i = 0; i < std::max(1u, compressors); ++i) compressors_.emplace_back([this] { compress_loop(); });
  writer_ = std::thread([this] { write_loop(); });
  if (max_blocks_ > blocks_in_flight) grower_ = std::thread([this] { grow_loop(); });
}

BlockPipeline::~BlockPipeline() { finish(); }

// The block is claimed under the lock, its pages touched outside it: the
// grower (at the program's nice value, faulting in hundreds of KB per block)
// must not hold the drain waiting on the lock while a crowded machine
// deschedules it. A drop at 40 M/s after a 245 ms drain pass with only 9 ms
// of run delay, the drain having grown blocks itself, fits that wait.
Block* BlockPipeline::grow() {
  Block* b;
  {
    std::lock_guard lk(grow_mu_);
    if (allocated_.load(std::memory_order_relaxed) >= max_blocks_) return nullptr;
    if (!hollow_.empty()) {
      b = hollow_.back();
      hollow_.pop_back();
    } else {
      b = &storage_.emplace_back();
    }
    allocated_.fetch_add(1, std::memory_order_relaxed);
  }
  b->events.reserve(block_events_);  // zero-filled: every page touched here
  stats_.blocks_grown++;
  return b;
}

// Looks kLooks times per quiet period. Keeps twice the period's peak use (and
// at least the initial blocks): a burst that comes back finds room without
// growing, while the memory of a burst gone for the whole period is returned.
void BlockPipeline::release_idle() {
  constexpr size_t kLooks = 4;
  size_t peak = interval_peak_.exchange(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  interval_peaks_.push_back(peak);
  if (interval_peaks_.size() > kLooks) interval_peaks_.erase(interval_peaks_.begin());
  if (interval_peaks_.size() < kLooks) return;
  size_t keep = std::max(initial_blocks_, 2 * *std::max_element(interval_peaks_.begin(), interval_peaks_.end()));
  std::vector<Block*> emptied;
  Block* b = nullptr;
  size_t have = allocated_.load(std::memory_order_relaxed);
  while (have - emptied.size() > keep && free_.try_pop(b)) {
    b->events = RecordedEvents{};
    b->frame = EncodedFrame{};
    emptied.push_back(b);
  }
  if (emptied.empty()) return;
  // The blocks' buffers came from malloc's arenas (too small for mmap once
  // its threshold adapted): without a trim many of their pages stay resident.
  // Counted as released only once their pages are gone.
  malloc_trim(0);
  std::lock_guard lk(grow_mu_);
  hollow_.insert(hollow_.end(), emptied.begin(), emptied.end());
  allocated_.fetch_sub(emptied.size(), std::memory_order_relaxed);
  stats_.blocks_released += emptied.size();
}

// Makes blocks ahead of the producer, so a stall downstream is absorbed by
// memory touched on this thread, not by page faults on the drain.
void BlockPipeline::top_up(size_t target) {
  while (allocated_.load(std::memory_order_relaxed) < max_blocks_ && free_.size() < target) {
    Block* b = grow();
    if (!b) return;
    free_.push(b);
  }
}

// Asleep until acquire() finds the free list low. It looks at the use
// periodically only while the pool holds more than its initial blocks (a
// burst's memory to give back); an idle recorder at its initial size never
// wakes it.
void BlockPipeline::grow_loop() {
  for (;;) {
    bool wanted;
    {
      std::unique_lock lk(grow_wait_mu_);
      auto woken = [this] { return grow_stop_ || grow_wanted_.load(); };
      uint64_t quiet_ms = release_after_ms_.load(std::memory_order_relaxed);
      if (quiet_ms && allocated_.load(std::memory_order_relaxed) > initial_blocks_)
        wanted = grow_cv_.wait_for(lk, std::chrono::milliseconds(std::max<uint64_t>(1, quiet_ms / 4)), woken);
      else
        grow_cv_.wait(lk, woken), wanted = true;
      if (grow_stop_) return;
    }
    if (wanted) {
      interval_peaks_.clear();  // a low free list: use is not quiet
      top_up(2 * low_water_);
      grow_wanted_.store(false);
    } else {
      release_idle();
    }
  }
}

Block* BlockPipeline::acquire() {
  Block* b = nullptr;
  size_t left = 0;
  if (free_.try_pop(b, &left)) {
    // One wake per low spell (the flag), not one per block.
    if (left < low_water_ && allocated_.load(std::memory_order_relaxed) < max_blocks_ && !grow_wanted_.exchange(true)) {
      { std::lock_guard lk(grow_wait_mu_); }
      grow_cv_.notify_one();
    }
  } else {
    if ((b = grow()))
      stats_.grown_by_producer++;
    else {  // at the cap: backpressure, the rings fill and count what they drop
      uint64_t t0 = now_ns();
      free_.pop(b);  // never closed
      uint64_t waited = now_ns() - t0;
      stats_.producer_waits++;
      stats_.producer_wait_ns += waited;
      note_max(stats_.max_producer_wait_ns, waited);
    }
  }
  size_t using_now = in_use_.fetch_add(1, std::memory_order_relaxed) + 1;
  note_max(stats_.blocks_peak, using_now);
  note_max(interval_peak_, using_now);
  b->events.clear();
  b->precoded = false;
  return b;
}

void BlockPipeline::submit(Block* b) {
  // Sequence numbers are handed out in queue order, so compressors take blocks
  // oldest first; with several compressors the writer still reorders.
  std::lock_guard lk(submit_mu_);
  b->seq = next_seq_++;
  note_max(stats_.ready_peak, ready_.push(b));
}

void BlockPipeline::submit_frame(EncodedFrame f) {
  Block* b = acquire();
  b->frame = std::move(f);
  b->precoded = true;
  submit(b);
}

void BlockPipeline::give_back(Block* b) {
  in_use_.fetch_sub(1, std::memory_order_relaxed);
  free_.push(b);
}

namespace {

// Compression and writing keep up only if they get the CPU: measured on a
// shared 2-vCPU machine (load 10+), a compressor at the traced program's nice
// value fell behind by a whole 1 GiB pool in 40 s at 10 M events/s. Between
// the drain's -10 and the program's 0: its work is bounded by what the
// program produced (the backlog in the pool), so it catches up and sleeps
// again rather than starving anyone. Unprivileged: EPERM, left as is.
constexpr int kPipelineNice = -5;
void raise_priority() { setpriority(PRIO_PROCESS, gettid(), kPipelineNice); }

}  // namespace

// Until finish() closes ready_ and it is empty.
//
// The level follows how busy this compressor is: a recording's bytes are not
// reproducible anyway (its timestamps), while at tens of M events/s on a
// machine with few CPUs zstd's time is taken from the traced program. Busy
// counts wall time in the encoder, so a compressor slowed by a crowded
// machine goes fast too. Readers decode every level alike.
void BlockPipeline::compress_loop() {
  raise_priority();
  Block* b = nullptr;
  bool fast = false;
  uint64_t window_start = now_ns(), busy_ns = 0;
  while (ready_.pop(b)) {
    // Reuses the block's payload buffer: no allocation per frame.
    if (!b->precoded) {
      uint64_t t0 = now_ns();
      encode_recorded_into(b->events, fast ? fast_level_.load(std::memory_order_relaxed) : zstd_level_, b->frame);
      uint64_t t1 = now_ns();
      note_max(stats_.max_compress_ns, t1 - t0);
      stats_.fast_frames += fast;
      busy_ns += t1 - t0;
      if (uint64_t window = t1 - window_start; window >= kBusyWindowMs * 1000000) {
        if (adaptive_.load(std::memory_order_acquire))
          fast = 100 * busy_ns > (fast ? kSlowBelowPct : kFastAbovePct) * window;
        window_start = t1;
        busy_ns = 0;
      }
    }
    note_max(stats_.done_peak, done_.push(b));
  }
}

// Until finish() closes done_ (after the last compressor ended) and it is empty.
void BlockPipeline::write_loop() {
  raise_priority();
  std::map<uint64_t, Block*> pending;  // out-of-order arrivals from several compressors
  uint64_t next = 0;
  Block* b = nullptr;
  while (done_.pop(b)) {
    pending.emplace(b->seq, b);
    for (auto it = pending.begin(); it != pending.end() && it->first == next; it = pending.erase(it), ++next) {
      Block* w = it->second;
      if (failed())
        discard_block(w);
      else
        write_block(w);
      give_back(w);
    }
  }
}

void BlockPipeline::write_block(Block* b) {
  try {
    uint64_t t0 = now_ns();
    sink_(b->frame);
    uint64_t took = now_ns() - t0;
    stats_.write_ns += took;
    note_max(stats_.max_write_ns, took);
  } catch (const std::exception& e) {
    // Keep consuming so producers never block on a dead writer; what is not
    // written from here on is counted instead (discarded()).
    failure_.what = e.what();
    if (auto* se = dynamic_cast<const std::system_error*>(&e); se && se->code().category() == std::generic_category())
      failure_.error = se->code().value();
    failed_.store(true, std::memory_order_release);
    discard_block(b);
    return;
  }
  if (!b->precoded) {
    stats_.events += b->events.size();
    stats_.raw_bytes += b->events.size() * sizeof(TraceEvent);
  }
  stats_.frame_bytes += sizeof(FrameHeader) + b->frame.payload.size();
}

void BlockPipeline::discard_block(const Block* b) {
  DiscardedRecords& d = discarded_;
  if (b->precoded) {
    if (b->frame.hdr.type == uint16_t(FrameType::Net) || b->frame.hdr.type == uint16_t(FrameType::Net2))
      d.net_events += b->frame.hdr.count;
    return;  // clock, channel, handler, sync and counter frames: rewritten at stop
  }
  const RecordedEvents& ev = b->events;
  size_t start = 0;
  for (const EventRun& r : ev.runs()) {
    bool series = r.kind == uint8_t(EventKind::Count);
    auto& v = series ? d.series_per_cpu : d.events_per_cpu;
    if (v.size() <= r.cpu) v.resize(r.cpu + 1u);
    for (size_t i = start; i < r.end; ++i) v[r.cpu] += series ? ev.rows()[i].tuple : 1;
    d.series_points += series ? r.end - start : 0;
    start = r.end;
  }
}

uint64_t DiscardedRecords::events() const {
  return std::accumulate(events_per_cpu.begin(), events_per_cpu.end(), uint64_t(0));
}

void BlockPipeline::finish() {
  if (stopping_.exchange(true)) return;
  ready_.close();
  for (auto& t : compressors_) t.join();
  done_.close();
  writer_.join();
  {
    std::lock_guard lk(grow_wait_mu_);
    grow_stop_ = true;
  }
  grow_cv_.notify_all();
  if (grower_.joinable()) grower_.join();
}

}  // namespace cptrace
