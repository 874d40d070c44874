// Collector front half: drains the per-CPU BPF ring buffers into pipeline
// blocks. One thread; it polls with a timeout because the BPF side wakes it
// only past a fill threshold (a per-event wakeup would cost the application
// ~8 us per event).
#pragma once
#include <atomic>
#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "probe/block_pipeline.h"
#include "trace/clock_transform.h"
#include "cptrace_records.h"
#include "trace/trace_format.h"

struct ring_buffer;

namespace cptrace {

class RingDrain {
 public:
  using ChannelFn = std::function<void(const ChannelInfo&)>;
  // ring_fds: one BPF ring buffer per CPU. on_channel: called (on the drain
  // thread) for every channel-name record.
  RingDrain(const std::vector<int>& ring_fds, BlockPipeline& pipeline, ChannelFn on_channel,
            int poll_ms = 5);
  ~RingDrain();

  void start();
  // Stops the thread after consuming everything in the rings, then hands the
  // partly filled block on. Call after the probes are detached.
  void stop_and_flush();
  // Hands the current partial block on now (periodic flush, so a SIGKILL loses
  // at most one flush period). Thread-safe: executed by the drain thread.
  void request_flush() { flush_requested_.store(true); }

  // Test-only simulated clock applied to TSC-timebase events (the batch path);
  // set before start().
  void set_tsc_transform(const ClockTransform* t) { tsc_transform_ = t; }

  uint64_t records() const { return records_.load(); }
  uint64_t events() const { return events_.load(); }
  // Of those, points of `counter` series (EventKind::Count): summaries, not events.
  uint64_t series_points() const { return series_points_.load(); }
  // Processes whose records were seen (read after stop_and_flush()).
  const std::set<uint32_t>& pids() const { return pids_; }

  // Decodes one ring record into events (exposed for tests).
  static int decode(const void* data, size_t size, std::vector<TraceEvent>& out,
                    ChannelInfo* channel);

 private:
  static int on_record(void* ctx, void* data, size_t size);
  void loop();
  void push_events(const TraceEvent* ev, size_t n);
  void flush_block();

  BlockPipeline& pipeline_;
  ChannelFn on_channel_;
  int poll_ms_;
  ring_buffer* rb_ = nullptr;
  Block* cur_ = nullptr;
  std::vector<TraceEvent> scratch_;
  std::set<uint32_t> pids_;
  uint32_t last_pid_ = 0;
  const ClockTransform* tsc_transform_ = nullptr;
  std::atomic<bool> stop_{false};
  std::atomic<bool> flush_requested_{false};
  std::atomic<uint64_t> records_{0}, events_{0}, series_points_{0};
  std::thread thread_;
};

}  // namespace cptrace
