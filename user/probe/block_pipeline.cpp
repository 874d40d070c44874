#include "probe/block_pipeline.h"

#include <map>
#include <mutex>
#include <numeric>
#include <system_error>

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
      if (failed())
        discard_block(w);
      else
        write_block(w);
      written_seq_.store(next + 1);
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
    if (auto* se = dynamic_cast<const std::system_error*>(&e);
        se && se->code().category() == std::generic_category())
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
  for (const TraceEvent& e : b->events) {
    bool series = e.kind == uint8_t(EventKind::Count);
    auto& v = series ? d.series_per_cpu : d.events_per_cpu;
    if (v.size() <= e.cpu) v.resize(e.cpu + 1u);
    v[e.cpu] += series ? e.tuple : 1;
    d.series_points += series;
  }
}

uint64_t DiscardedRecords::events() const {
  return std::accumulate(events_per_cpu.begin(), events_per_cpu.end(), uint64_t(0));
}

void BlockPipeline::finish() {
  if (stopping_.exchange(true)) return;
  for (auto& t : compressors_) t.join();
  writer_.join();
}

}  // namespace cptrace
