#include "collect/ring_drain.h"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cstring>
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

// Appends n events that share a record's header fields; returns the first row.
size_t append_rows(EventColumns& out, const cp_rec_hdr* h, size_t n, EventKind kind, Timebase tb) {
  size_t at = out.extend(n);
  std::fill_n(out.pid.data() + at, n, h->pid);
  std::fill_n(out.tid.data() + at, n, h->tid);
  std::fill_n(out.cpu.data() + at, n, h->cpu);
  std::fill_n(out.kind.data() + at, n, uint8_t(kind));
  std::fill_n(out.timebase.data() + at, n, uint8_t(tb));
  return at;
}

void set_row(EventColumns& out, size_t i, uint64_t ts, uint64_t channel, uint64_t tuple) {
  out.ts[i] = ts;
  out.channel[i] = channel;
  out.tuple[i] = tuple;
}

}  // namespace

int RingDrain::decode(const void* data, size_t size, EventColumns& out, ChannelInfo* channel) {
  if (size < sizeof(cp_rec_hdr)) return -1;
  const auto* h = static_cast<const cp_rec_hdr*>(data);
  switch (h->kind) {
    case CP_REC_EVENT:
    case CP_REC_CLOSE: {
      if (size < sizeof(cp_event_rec)) return -1;
      const auto* r = static_cast<const cp_event_rec*>(data);
      // Stamped by the probe site itself, at the call (lib/probe_site.h).
      size_t i =
          append_rows(out, h, 1, h->kind == CP_REC_EVENT ? EventKind::User : EventKind::ChannelClose, Timebase::Tsc);
      set_row(out, i, r->tsc, r->channel, r->tuple);
      return 1;
    }
    case CP_REC_SINGLES: {  // staged cp_logTS() calls: each entry has its own thread
      const auto* r = static_cast<const cp_singles_rec*>(data);
      if (size < sizeof(cp_singles_rec) || h->n > CP_STAGE_MAX) return -1;
      size_t at = append_rows(out, h, h->n, EventKind::User, Timebase::Tsc);
      for (uint32_t i = 0; i < h->n; ++i) {
        const cp_single_entry& e = r->e[i];
        set_row(out, at + i, e.tsc, e.channel, e.tuple);
        out.pid[at + i] = e.pid;
        out.tid[at + i] = e.tid;
      }
      return int(h->n);
    }
    case CP_REC_BATCH:
    case CP_REC_BATCH_MONO: {  // Java batches carry System.nanoTime() stamps
      const auto* r = static_cast<const cp_batch_rec*>(data);
      if (size < sizeof(cp_batch_rec) || h->n > CP_BATCH_MAX) return -1;
      size_t at =
          append_rows(out, h, h->n, EventKind::User, h->kind == CP_REC_BATCH ? Timebase::Tsc : Timebase::MonoNs);
      uint64_t* ts = out.ts.data() + at;
      uint64_t* ch = out.channel.data() + at;
      uint64_t* tu = out.tuple.data() + at;
      for (uint32_t i = 0; i < h->n; ++i) {
        ts[i] = r->e[i].tsc;
        ch[i] = r->e[i].channel;
        tu[i] = r->e[i].tuple;
      }
      return int(h->n);
    }
    case CP_REC_COUNT: {  // one point of a `counter` handler's series
      if (size < sizeof(cp_count_rec)) return -1;
      const auto* r = static_cast<const cp_count_rec*>(data);
      size_t i = append_rows(out, h, 1, EventKind::Count, h->n ? Timebase::Tsc : Timebase::MonoNs);
      set_row(out, i, r->start, r->channel, r->count);
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
  EventColumns cols;
  int n = decode(data, size, cols, channel);
  for (size_t i = 0; i < cols.size(); ++i) out.push_back(cols.at(i));
  return n;
}

// Decodes straight into the current block, which always has room for a whole
// record; a block with less room left than the largest record is handed on.
int RingDrain::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingDrain*>(ctx);
  if (!self->cur_) self->cur_ = self->pipeline_.acquire();
  EventColumns& ev = self->cur_->events;
  size_t first = ev.size();
  ChannelInfo ch;
  int n = decode(data, size, ev, &ch);
  self->records_++;
  // Staged events carry their own pids (the header's is whoever handed them over).
  bool staged = size >= sizeof(cp_rec_hdr) && static_cast<const cp_rec_hdr*>(data)->kind == CP_REC_SINGLES;
  for (size_t i = staged ? first : 0; staged && i < ev.size(); ++i) self->note_pid(ev.pid[i]);
  if (!staged && size >= sizeof(cp_rec_hdr)) self->note_pid(static_cast<const cp_rec_hdr*>(data)->pid);
  if (n > 0) {
    if (self->tsc_transform_)
      for (size_t i = first; i < ev.size(); ++i)
        if (ev.timebase[i] == uint8_t(Timebase::Tsc)) ev.ts[i] = self->tsc_transform_->apply(ev.ts[i]);
    if (static_cast<const cp_rec_hdr*>(data)->kind == CP_REC_COUNT) self->series_points_++;
    self->events_ += n;
    if (self->pipeline_.block_events() - ev.size() < CP_BATCH_MAX) self->flush_block();
  } else if (n == 0 && self->on_channel_) {
    self->on_channel_(ch);
  }
  return 0;  // never abort consumption: an unknown record must not stall the rings
}

void RingDrain::flush_block() {
  if (cur_ && !cur_->events.empty()) {
    pipeline_.submit(cur_);
    cur_ = nullptr;
  }
}

void RingDrain::loop() {
  while (!stop_.load()) {
    waiter_->wait(poll_ms_);
    bool flush = flush_requested_.exchange(false);
    // Staged events of every CPU into the rings first, so the flush holds them.
    if (flush && stage_) stage_->flush_each_cpu();
    // Empties every ring, whichever woke us.
    if (rb_) ring_buffer__consume(rb_);
    if (flush) flush_block();
  }
  // Probes are detached by now: what is left in the rings and stages is final.
  while (rb_ && ring_buffer__consume(rb_) > 0) {
  }
  if (stage_)
    for (cp_singles_rec& r : stage_->leftovers()) on_record(this, &r, sizeof r);
  flush_block();
  if (cur_) pipeline_.give_back(cur_);  // acquired but still empty
  cur_ = nullptr;
}

}  // namespace cptrace
