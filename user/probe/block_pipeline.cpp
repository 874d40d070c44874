#include "probe/block_pipeline.h"

#include <map>
#include <mutex>

namespace cptrace {

namespace {
// Idle threads back off to a short sleep: blocks arrive at most every few ms,
// and a spinning thread would steal one of this machine's two cores.
void idle(unsigned& spins) {
  if (++spins < 64)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}
}  // namespace

BlockPipeline::BlockPipeline(Sink sink, size_t block_events, unsigned compressors,
                             size_t blocks_in_flight, int zstd_level)
    : sink_(std::move(sink)), block_events_(block_events), zstd_level_(zstd_level),
      storage_(blocks_in_flight), free_(blocks_in_flight), ready_(blocks_in_flight),
      done_(blocks_in_flight) {
  for (auto& b : storage_) {
    b.events.reserve(block_events_);
    free_.push(&b);
  }
  for (unsigned i = 0; i < std::max(1u, compressors); ++i)
    compressors_.emplace_back([this] { compress_loop(); });
  writer_ = std::thread([this] { write_loop(); });
}

BlockPipeline::~BlockPipeline() { finish(); }

Block* BlockPipeline::acquire() {
  Block* b = nullptr;
  unsigned spins = 0;
  bool waited = false;
  while (!free_.pop(b)) {
    waited = true;
    idle(spins);
  }
  if (waited) stats_.producer_waits++;
  b->events.clear();
  b->precoded = false;
  return b;
}

void BlockPipeline::submit(Block* b) {
  // seq assignment and push must be atomic together, or a later seq could sit in
  // the queue ahead of an earlier one; that is fine (the writer reorders), but a
  // seq must never be skipped, so assign before pushing.
  b->seq = next_seq_.fetch_add(1);
  while (!ready_.push(b)) std::this_thread::yield();
}

void BlockPipeline::submit_frame(EncodedFrame f) {
  Block* b = acquire();
  b->frame = std::move(f);
  b->precoded = true;
  submit(b);
}

void BlockPipeline::give_back(Block* b) {
  while (!free_.push(b)) std::this_thread::yield();
}

void BlockPipeline::compress_loop() {
  unsigned spins = 0;
  for (;;) {
    Block* b = nullptr;
    if (!ready_.pop(b)) {
      if (stopping_.load() && ready_.empty()) return;
      idle(spins);
      continue;
    }
    spins = 0;
    // Reuses the block's payload buffer: no allocation per frame.
    if (!b->precoded) encode_events_into(b->events.data(), b->events.size(), zstd_level_, b->frame);
    while (!done_.push(b)) std::this_thread::yield();
  }
}

void BlockPipeline::write_loop() {
  std::map<uint64_t, Block*> pending;  // out-of-order arrivals from several compressors
  uint64_t next = 0;
  unsigned spins = 0;
  for (;;) {
    Block* b = nullptr;
    if (done_.pop(b)) {
      pending.emplace(b->seq, b);
      spins = 0;
    } else {
      if (stopping_.load() && next == next_seq_.load() && pending.empty()) return;
      idle(spins);
    }
    for (auto it = pending.begin(); it != pending.end() && it->first == next;
         it = pending.erase(it), ++next) {
      Block* w = it->second;
      sink_(w->frame);
      if (!w->precoded) {
        stats_.events += w->events.size();
        stats_.raw_bytes += w->events.size() * sizeof(TraceEvent);
      }
      stats_.frame_bytes += sizeof(FrameHeader) + w->frame.payload.size();
      written_seq_.store(next + 1);
      give_back(w);
    }
  }
}

void BlockPipeline::finish() {
  if (stopping_.exchange(true)) return;
  for (auto& t : compressors_) t.join();
  writer_.join();
}

}  // namespace cptrace
