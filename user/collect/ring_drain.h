// Collector front half: drains the per-CPU BPF ring buffers into pipeline
// blocks. One thread, asleep in epoll_wait on the rings and on an eventfd: the
// BPF side wakes it only once a ring holds its wakeup threshold (a per-event
// wakeup would cost the application ~8 us per event), and the recorder's
// periodic flush, stop_and_flush() and request_flush() wake it through the
// eventfd, so what stays below the threshold waits at most one flush period.
// A timeout (poll_ms) only bounds the sleep should every wakeup be missed.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "collect/block_pipeline.h"
#include "collect/ring_waiter.h"
#include "collect/stage_flush.h"
#include "clock/clock_transform.h"
#include "cptrace_records.h"
#include "trace/trace_format.h"

struct ring_buffer;

namespace cptrace {

// What the drain thread saw of its own stalls (read after stop_and_flush()).
struct DrainStats {
  uint64_t passes = 0;  // ring_buffer__consume() calls
  uint64_t max_gap_ns = 0;  // longest time between the starts of two passes
  uint64_t max_pass_ns = 0;  // longest pass (a wait for a free block included)
  uint64_t ring_bytes = 0;  // the largest ring's size
  uint64_t ring_peak_bytes = 0;  // the most bytes any ring held when a pass began
  uint64_t run_delay_ns = 0;  // time runnable but not running (schedstat), whole recording
  int nice = 0;  // the drain thread's nice value as set (0: left as is)
  uint64_t ring_peak_after_bytes = 0;  // the most bytes a ring still held after a pass
  // The passes after which the drop counter had grown (the first 16): what the
  // drain saw just before each drop.
  struct DropPass {
    uint64_t at_ms = 0;  // since the drain started
    uint64_t gap_ms = 0;  // since the previous pass began
    uint64_t ring_pct = 0;  // the fullest ring when this pass began
    uint64_t pass_ms = 0;  // how long this pass took
    uint64_t gap_delay_ms = 0;  // runnable, not running, from the previous pass to this one
    uint64_t pass_delay_ms = 0;  // runnable, not running, during this pass
    uint64_t dropped = 0;  // the counter's growth since the previous pass
  };
  std::vector<DropPass> drop_passes;
};

class RingDrain {
 public:
  using ChannelFn = std::function<void(const ChannelInfo&)>;
  // ring_fds: one BPF ring buffer per CPU. The pipeline's blocks must hold at
  // least CP_BATCH_MAX events (a record is never split over two blocks). on_channel: called (on the drain
  // thread) for every channel-name record.
  RingDrain(const std::vector<int>& ring_fds, BlockPipeline& pipeline, ChannelFn on_channel, int poll_ms = 1000);
  ~RingDrain();

  void start();
  // Stops the thread after consuming everything in the rings, then hands the
  // partly filled block on. Call after the probes are detached.
  void stop_and_flush();
  // Hands the current partial block on now (periodic flush, so a SIGKILL loses
  // at most one flush period). Thread-safe: executed by the drain thread.
  void request_flush();

  // Where cp_logTS() events wait per CPU (collect/stage_flush.h); set before start().
  void set_stage(StageFlusher* s) { stage_ = s; }

  // Called on the drain thread with each pid the first time its records are
  // seen (the recorder reads its namespace pid then); set before start().
  void set_on_new_pid(std::function<void(uint32_t)> fn) { on_new_pid_ = std::move(fn); }

  // The kernel side's drop counter, read once per pass (one map lookup), so
  // stats() can say which pass first saw each drop; set before start().
  void set_drop_counter(std::function<uint64_t()> fn) { drop_counter_ = std::move(fn); }

  // Test-only simulated clock applied to TSC-timebase events (every probe
  // site's stamp and the C batch entries); set before start().
  void set_tsc_transform(const ClockTransform* t) { tsc_transform_ = t; }

  uint64_t records() const { return records_.load(); }
  const DrainStats& stats() const { return stats_; }
  uint64_t events() const { return events_.load(); }
  // Of those, points of `counter` series (EventKind::Count): summaries, not events.
  uint64_t series_points() const { return series_points_.load(); }
  // Processes whose records were seen (read after stop_and_flush()).
  const std::set<uint32_t>& pids() const { return pids_; }

  // Decodes one ring record, appending its events to `out` (a channel record
  // fills *channel instead). Returns the number of events, 0 for a channel
  // record, -1 for a record too short or of an unknown kind (nothing appended).
  static int decode(const void* data, size_t size, RecordedEvents& out, ChannelInfo* channel);
  // The same into rows (tests).
  static int decode(const void* data, size_t size, std::vector<TraceEvent>& out, ChannelInfo* channel);

 private:
  static int on_record(void* ctx, void* data, size_t size);
  void loop();
  void consume_pass();
  void map_ring_positions(int fd);
  void flush_block();
  void transform_rows(RecordedEvents& ev, size_t first) const;
  void note_pid(uint32_t pid) {
    if (pid == last_pid_) return;
    if (pids_.insert(last_pid_ = pid).second && on_new_pid_) on_new_pid_(pid);
  }

  BlockPipeline& pipeline_;
  ChannelFn on_channel_;
  int poll_ms_;
  ring_buffer* rb_ = nullptr;
  std::unique_ptr<RingWaiter> waiter_;  // the rings, flush and stop requests
  StageFlusher* stage_ = nullptr;
  Block* cur_ = nullptr;
  std::set<uint32_t> pids_;
  uint32_t last_pid_ = 0;
  std::function<void(uint32_t)> on_new_pid_;
  const ClockTransform* tsc_transform_ = nullptr;
  std::atomic<bool> stop_{false};
  std::atomic<bool> flush_requested_{false};
  std::atomic<uint64_t> records_{0}, events_{0}, series_points_{0};
  // Each ring's position pages, mapped read-only: how full a ring is costs two
  // loads per pass (libbpf 1.1 has no ring__avail_data_size()).
  struct RingPos {
    const volatile uint64_t* consumer = nullptr;
    const volatile uint64_t* producer = nullptr;
  };
  std::vector<RingPos> ring_pos_;
  DrainStats stats_;
  uint64_t last_pass_ns_ = 0, started_ns_ = 0, last_dropped_ = 0, last_delay_ns_ = 0;
  std::function<uint64_t()> drop_counter_;
  std::thread thread_;
};

}  // namespace cptrace
