#include "collect/ring_drain.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

namespace cptrace {

RingDrain::RingDrain(const std::vector<int>& ring_fds, BlockPipeline& pipeline, ChannelFn on_channel, int poll_ms)
    : pipeline_(pipeline), on_channel_(std::move(on_channel)), poll_ms_(poll_ms) {
  for (int fd : ring_fds) {
    int err = 0;
    if (!rb_) {
      rb_ = ring_buffer__new(fd, &RingDrain::on_record, this, nullptr);
      err = rb_ ? 0 : -errno;
    } else {
      err = ring_buffer__add(rb_, fd, &RingDrain::on_record, this);
    }
    if (err) throw std::runtime_error("ring buffer setup failed: " + std::string(strerror(-err)));
    map_ring_positions(fd);
  }
  if (pipeline.block_events() < CP_BATCH_MAX) {
    ring_buffer__free(rb_);
    throw std::invalid_argument("ring drain: pipeline blocks smaller than one batch record");
  }
  try {
    waiter_ = std::make_unique<RingWaiter>(rb_, "the ring drain");
  } catch (...) {
    ring_buffer__free(rb_);
    throw;
  }
}

RingDrain::~RingDrain() {
  if (thread_.joinable()) stop_and_flush();
  ring_buffer__free(rb_);
  long page = sysconf(_SC_PAGESIZE);
  for (const RingPos& p : ring_pos_) {
    munmap(const_cast<uint64_t*>(p.consumer), page);
    munmap(const_cast<uint64_t*>(p.producer), page);
  }
}

// A ring's consumer position is its first page, the producer's the second
// (the BPF ring buffer's mmap layout); a ring that cannot be mapped is left
// out of the figures.
void RingDrain::map_ring_positions(int fd) {
  bpf_map_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return;
  long page = sysconf(_SC_PAGESIZE);
  void* c = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, 0);
  if (c == MAP_FAILED) return;
  void* p = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, page);
  if (p == MAP_FAILED) {
    munmap(c, page);
    return;
  }
  ring_pos_.push_back({static_cast<const volatile uint64_t*>(c), static_cast<const volatile uint64_t*>(p)});
  stats_.ring_bytes = std::max<uint64_t>(stats_.ring_bytes, info.max_entries);
}

void RingDrain::start() {
  thread_ = std::thread([this] { loop(); });
}

void RingDrain::request_flush() {
  flush_requested_.store(true);
  waiter_->wake();
}

void RingDrain::stop_and_flush() {
  stop_.store(true);
  waiter_->wake();
  if (thread_.joinable()) thread_.join();
}

namespace {

// Adds n rows sharing a record's header fields; returns the first row.
EventEntry* append_rows(RecordedEvents& out, const cp_rec_hdr* h, size_t n, EventKind kind, Timebase tb) {
  return out.append_run(n, EventRun{0, h->pid, h->tid, h->cpu, uint8_t(kind), uint8_t(tb)});
}

}  // namespace

int RingDrain::decode(const void* data, size_t size, RecordedEvents& out, ChannelInfo* channel) {
  if (size < sizeof(cp_rec_hdr)) return -1;
  const auto* h = static_cast<const cp_rec_hdr*>(data);
  switch (h->kind) {
    case CP_REC_EVENT:
    case CP_REC_CLOSE: {
      if (size < sizeof(cp_event_rec)) return -1;
      const auto* r = static_cast<const cp_event_rec*>(data);
      // Stamped by the probe site itself, at the call (lib/probe_site.h).
      *append_rows(out, h, 1, h->kind == CP_REC_EVENT ? EventKind::User : EventKind::ChannelClose, Timebase::Tsc) = {
          r->tsc, r->channel, r->tuple};
      return 1;
    }
    case CP_REC_SINGLES: {  // staged cp_logTS() calls: each entry has its own thread
      const auto* r = static_cast<const cp_singles_rec*>(data);
      if (size < sizeof(cp_singles_rec) || h->n > CP_STAGE_MAX) return -1;
      for (uint32_t i = 0; i < h->n; ++i) {
        const cp_single_entry& e = r->e[i];
        *out.append_run(1, EventRun{0, e.pid, e.tid, h->cpu, uint8_t(EventKind::User), uint8_t(Timebase::Tsc)}) = {
            e.tsc, e.channel, e.tuple};
      }
      return int(h->n);
    }
    case CP_REC_BATCH:
    case CP_REC_BATCH_CPU:  // every entry stamped on the TSC of CPU h->cpu
    case CP_REC_BATCH_MONO: {  // Java batches carry System.nanoTime() stamps
      const auto* r = static_cast<const cp_batch_rec*>(data);
      if (size < sizeof(cp_batch_rec) || h->n > CP_BATCH_MAX) return -1;
      const Timebase tb = h->kind == CP_REC_BATCH_MONO  ? Timebase::MonoNs
                          : h->kind == CP_REC_BATCH_CPU ? Timebase::TscOnCpu
                                                        : Timebase::Tsc;
      if (h->n > 0) std::memcpy(append_rows(out, h, h->n, EventKind::User, tb), r->e, h->n * sizeof(cp_batch_entry));
      return int(h->n);
    }
    case CP_REC_COUNT: {  // one point of a `counter` handler's series
      if (size < sizeof(cp_count_rec)) return -1;
      const auto* r = static_cast<const cp_count_rec*>(data);
      *append_rows(out, h, 1, EventKind::Count, h->n ? Timebase::Tsc : Timebase::MonoNs) = {r->start, r->channel,
                                                                                            r->count};
      return 1;
    }
    case CP_REC_CHANNEL: {
      if (size < sizeof(cp_channel_rec) || !channel) return -1;
      const auto* r = static_cast<const cp_channel_rec*>(data);
      channel->id = r->channel;
      channel->pid = h->pid;
      channel->name.assign(r->name, strnlen(r->name, sizeof(r->name)));
      return 0;
    }
  }
  return -1;
}

int RingDrain::decode(const void* data, size_t size, std::vector<TraceEvent>& out, ChannelInfo* channel) {
  RecordedEvents rec;
  int n = decode(data, size, rec, channel);
  for (size_t i = 0; i < rec.size(); ++i) out.push_back(rec.at(i));
  return n;
}

// Decodes straight into the current block, which always has room for a whole
// record; a block with less room left than the largest record is handed on.
int RingDrain::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingDrain*>(ctx);
  if (!self->cur_) self->cur_ = self->pipeline_.acquire();
  RecordedEvents& ev = self->cur_->events;
  size_t first = ev.size();
  ChannelInfo ch;
  int n = decode(data, size, ev, &ch);
  self->records_++;
  // Staged events carry their own pids (the header's is whoever handed them over).
  bool staged = size >= sizeof(cp_rec_hdr) && static_cast<const cp_rec_hdr*>(data)->kind == CP_REC_SINGLES;
  if (staged && n > 0)
    for (uint32_t i = 0; i < uint32_t(n); ++i) self->note_pid(static_cast<const cp_singles_rec*>(data)->e[i].pid);
  if (!staged && size >= sizeof(cp_rec_hdr)) self->note_pid(static_cast<const cp_rec_hdr*>(data)->pid);
  if (n > 0) {
    if (self->tsc_transform_) self->transform_rows(ev, first);
    if (static_cast<const cp_rec_hdr*>(data)->kind == CP_REC_COUNT) self->series_points_++;
    self->events_ += n;
    if (self->pipeline_.block_events() - ev.size() < CP_BATCH_MAX) self->flush_block();
  } else if (n == 0 && self->on_channel_) {
    self->on_channel_(ch);
  }
  return 0;  // never abort consumption: an unknown record must not stall the rings
}

// The simulated clocks of the testbed, on the TSC stamps of rows [first, size()).
// From the last run back: a record's rows are in the last runs of the block.
void RingDrain::transform_rows(RecordedEvents& ev, size_t first) const {
  const std::vector<EventRun>& runs = ev.runs();
  for (size_t k = runs.size(); k > 0 && runs[k - 1].end > first; --k) {
    size_t start = std::max<size_t>(k > 1 ? runs[k - 2].end : 0, first);
    if (is_tsc(runs[k - 1].timebase))
      for (size_t i = start; i < runs[k - 1].end; ++i) ev.rows()[i].tsc = tsc_transform_->apply(ev.rows()[i].tsc);
  }
}

void RingDrain::flush_block() {
  if (cur_ && !cur_->events.empty()) {
    pipeline_.submit(cur_);
    cur_ = nullptr;
  }
}

namespace {

uint64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Time this thread spent runnable but not running (the second field of
// schedstat), 0 where the kernel has no schedstats.
uint64_t thread_run_delay_ns() {
  std::ifstream f("/proc/thread-self/schedstat");
  uint64_t run = 0, delay = 0;
  return f >> run >> delay ? delay : 0;
}

// The drain must run as soon as a ring's wakeup fires: on a machine with few
// CPUs it shares one with the compressor, the writer and whatever else runs
// (builds), and a ring holds only tens of ms at tens of M events/s. A lower
// nice value (not SCHED_FIFO) gets it the CPU at its wakeup without letting it
// starve anyone: its work is bounded by what the traced program produced, so
// it sleeps again once the rings are empty, and should it ever run flat out
// CFS still leaves the others their (smaller) share. Unprivileged: EPERM, the
// drain keeps the process's nice value.
constexpr int kDrainNice = -10;

}  // namespace

// Empties every ring, noting how full the fullest was and how long since the
// previous pass.
void RingDrain::consume_pass() {
  uint64_t t0 = steady_ns();
  uint64_t gap = last_pass_ns_ ? t0 - last_pass_ns_ : 0;
  stats_.max_gap_ns = std::max(stats_.max_gap_ns, gap);
  last_pass_ns_ = t0;
  // Read per pass (a small /proc read, a few hundred passes a second at most)
  // only when drops are watched, so a drop can be told from a drain that was
  // runnable but not running.
  uint64_t delay0 = drop_counter_ ? thread_run_delay_ns() : 0;
  uint64_t fill = 0;
  for (const RingPos& p : ring_pos_) fill = std::max<uint64_t>(fill, *p.producer - *p.consumer);
  stats_.ring_peak_bytes = std::max(stats_.ring_peak_bytes, fill);
  if (rb_) ring_buffer__consume(rb_);
  for (const RingPos& p : ring_pos_)
    stats_.ring_peak_after_bytes = std::max<uint64_t>(stats_.ring_peak_after_bytes, *p.producer - *p.consumer);
  uint64_t took = steady_ns() - t0;
  stats_.passes++;
  stats_.max_pass_ns = std::max(stats_.max_pass_ns, took);
  if (!drop_counter_) return;
  uint64_t dropped = drop_counter_(), delay1 = thread_run_delay_ns();
  if (dropped > last_dropped_ && stats_.drop_passes.size() < 16)
    stats_.drop_passes.push_back({(t0 - started_ns_) / 1000000, gap / 1000000,
                                  stats_.ring_bytes ? 100 * fill / stats_.ring_bytes : 0, took / 1000000,
                                  last_delay_ns_ ? (delay0 - last_delay_ns_) / 1000000 : 0, (delay1 - delay0) / 1000000,
                                  dropped - last_dropped_});
  last_dropped_ = dropped;
  last_delay_ns_ = delay0;
}

void RingDrain::loop() {
  if (setpriority(PRIO_PROCESS, gettid(), kDrainNice) == 0) stats_.nice = kDrainNice;
  started_ns_ = steady_ns();
  if (drop_counter_) last_dropped_ = drop_counter_();
  while (!stop_.load()) {
    waiter_->wait(poll_ms_);
    bool flush = flush_requested_.exchange(false);
    // Staged events of every CPU into the rings first, so the flush holds them.
    if (flush && stage_) stage_->flush_each_cpu();
    // Empties every ring, whichever woke us.
    consume_pass();
    if (flush) flush_block();
  }
  stats_.run_delay_ns = thread_run_delay_ns();
  // Probes are detached by now: what is left in the rings and stages is final.
  consume_pass();
  while (rb_ && ring_buffer__consume(rb_) > 0) {
  }
  if (stage_)
    for (cp_singles_rec& r : stage_->leftovers()) on_record(this, &r, sizeof r);
  flush_block();
  if (cur_) pipeline_.give_back(cur_);  // acquired but still empty
  cur_ = nullptr;
}

}  // namespace cptrace
