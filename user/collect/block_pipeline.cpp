#include "collect/block_pipeline.h"

#include <map>
#include <mutex>
#include <numeric>
#include <system_error>

namespace cptrace {

void BlockQueue::push(Block* b) {
  {
    std::lock_guard lk(mu_);
    ring_[(head_ + count_++) % ring_.size()] = b;
  }
  cv_.notify_one();
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

BlockPipeline::BlockPipeline(Sink sink, size_t block_events, unsigned compressors, size_t blocks_in_flight,
                             int zstd_level)
    : sink_(std::move(sink)),
      block_events_(block_events),
      zstd_level_(zstd_level),
      storage_(blocks_in_flight),
      free_(blocks_in_flight),
      ready_(blocks_in_flight),
      done_(blocks_in_flight) {
  for (auto& b : storage_) {
    // Touched now, not when the first events arrive: first-touch page faults of
    // tens of MB cost the drain so much time that the rings overflow in the
    // first second of a fast recording.
    b.events.reserve(block_events_);
    free_.push(&b);
  }
  for (unsigned i = 0; i < std::max(1u, compressors); ++i) compressors_.emplace_back([this] { compress_loop(); });
  writer_ = std::thread([this] { write_loop(); });
}

BlockPipeline::~BlockPipeline() { finish(); }

Block* BlockPipeline::acquire() {
  Block* b = nullptr;
  bool waited = false;
  free_.pop(b, &waited);  // never closed
  if (waited) stats_.producer_waits++;
  b->events.clear();
  b->precoded = false;
  return b;
}

void BlockPipeline::submit(Block* b) {
  // Sequence numbers are handed out in queue order, so compressors take blocks
  // oldest first; with several compressors the writer still reorders.
  std::lock_guard lk(submit_mu_);
  b->seq = next_seq_++;
  ready_.push(b);
}

void BlockPipeline::submit_frame(EncodedFrame f) {
  Block* b = acquire();
  b->frame = std::move(f);
  b->precoded = true;
  submit(b);
}

void BlockPipeline::give_back(Block* b) { free_.push(b); }

// Until finish() closes ready_ and it is empty.
void BlockPipeline::compress_loop() {
  Block* b = nullptr;
  while (ready_.pop(b)) {
    // Reuses the block's payload buffer: no allocation per frame.
    if (!b->precoded) encode_columns_into(b->events, zstd_level_, b->frame);
    done_.push(b);
  }
}

// Until finish() closes done_ (after the last compressor ended) and it is empty.
void BlockPipeline::write_loop() {
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
    sink_(b->frame);
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
    if (b->frame.hdr.type == uint16_t(FrameType::Net)) d.net_events += b->frame.hdr.count;
    return;  // clock, channel, handler, sync and counter frames: rewritten at stop
  }
  const EventColumns& ev = b->events;
  for (size_t i = 0; i < ev.size(); ++i) {
    bool series = ev.kind[i] == uint8_t(EventKind::Count);
    auto& v = series ? d.series_per_cpu : d.events_per_cpu;
    uint16_t cpu = ev.cpu[i];
    if (v.size() <= cpu) v.resize(cpu + 1u);
    v[cpu] += series ? ev.tuple[i] : 1;
    d.series_points += series;
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
}

}  // namespace cptrace
