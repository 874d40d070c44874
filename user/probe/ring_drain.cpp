#include "probe/ring_drain.h"

#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace cptrace {

RingDrain::RingDrain(const std::vector<int>& ring_fds, BlockPipeline& pipeline,
                     ChannelFn on_channel, int poll_ms)
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
  scratch_.reserve(CP_BATCH_MAX);
  // One epoll set over libbpf's (which holds every ring) and the eventfd.
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  bool ok = epoll_fd_ >= 0 && wake_fd_ >= 0;
  if (ok && rb_) ok = epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb_), &ev) == 0;
  if (ok) ok = epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) == 0;
  if (!ok) {
    int err = errno;
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    ring_buffer__free(rb_);
    throw std::runtime_error("ring drain epoll setup failed: " + std::string(strerror(err)));
  }
}

RingDrain::~RingDrain() {
  if (thread_.joinable()) stop_and_flush();
  ring_buffer__free(rb_);
  close(epoll_fd_);
  close(wake_fd_);
}

void RingDrain::start() { thread_ = std::thread([this] { loop(); }); }

void RingDrain::wake() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof one);
  (void)n;  // only fails when the counter is near 2^64: a wakeup is pending anyway
}

void RingDrain::request_flush() {
  flush_requested_.store(true);
  wake();
}

void RingDrain::stop_and_flush() {
  stop_.store(true);
  wake();
  if (thread_.joinable()) thread_.join();
}

int RingDrain::decode(const void* data, size_t size, std::vector<TraceEvent>& out,
                      ChannelInfo* channel) {
  if (size < sizeof(cp_rec_hdr)) return -1;
  const auto* h = static_cast<const cp_rec_hdr*>(data);
  TraceEvent e;
  e.pid = h->pid;
  e.tid = h->tid;
  e.cpu = h->cpu;
  switch (h->kind) {
    case CP_REC_EVENT:
    case CP_REC_CLOSE: {
      if (size < sizeof(cp_event_rec)) return -1;
      const auto* r = static_cast<const cp_event_rec*>(data);
      e.ts = r->ktime_ns;
      e.timebase = uint8_t(Timebase::MonoNs);
      e.kind = uint8_t(h->kind == CP_REC_EVENT ? EventKind::User : EventKind::ChannelClose);
      e.channel = r->channel;
      e.tuple = r->tuple;
      out.push_back(e);
      return 1;
    }
    case CP_REC_BATCH:
    case CP_REC_BATCH_MONO: {  // Java batches carry System.nanoTime() stamps
      const auto* r = static_cast<const cp_batch_rec*>(data);
      if (size < sizeof(cp_batch_rec) || h->n > CP_BATCH_MAX) return -1;
      e.timebase = uint8_t(h->kind == CP_REC_BATCH ? Timebase::Tsc : Timebase::MonoNs);
      e.kind = uint8_t(EventKind::User);
      for (uint32_t i = 0; i < h->n; ++i) {
        e.ts = r->e[i].tsc;
        e.channel = r->e[i].channel;
        e.tuple = r->e[i].tuple;
        out.push_back(e);
      }
      return int(h->n);
    }
    case CP_REC_COUNT: {  // one point of a `counter` handler's series
      if (size < sizeof(cp_count_rec)) return -1;
      const auto* r = static_cast<const cp_count_rec*>(data);
      e.ts = r->start;
      e.timebase = uint8_t(h->n ? Timebase::Tsc : Timebase::MonoNs);
      e.kind = uint8_t(EventKind::Count);
      e.channel = r->channel;
      e.tuple = r->count;
      out.push_back(e);
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

int RingDrain::on_record(void* ctx, void* data, size_t size) {
  auto* self = static_cast<RingDrain*>(ctx);
  self->scratch_.clear();
  ChannelInfo ch;
  int n = decode(data, size, self->scratch_, &ch);
  self->records_++;
  if (size >= sizeof(cp_rec_hdr)) {
    uint32_t pid = static_cast<const cp_rec_hdr*>(data)->pid;
    if (pid != self->last_pid_) self->pids_.insert(self->last_pid_ = pid);
  }
  if (n > 0 && self->tsc_transform_)
    for (auto& e : self->scratch_)
      if (e.timebase == uint8_t(Timebase::Tsc)) e.ts = self->tsc_transform_->apply(e.ts);
  if (n > 0) {
    if (static_cast<const cp_rec_hdr*>(data)->kind == CP_REC_COUNT) self->series_points_++;
    self->push_events(self->scratch_.data(), self->scratch_.size());
  } else if (n == 0 && self->on_channel_) {
    self->on_channel_(ch);
  }
  return 0;  // never abort consumption: an unknown record must not stall the rings
}

void RingDrain::push_events(const TraceEvent* ev, size_t n) {
  events_ += n;
  while (n > 0) {
    if (!cur_) cur_ = pipeline_.acquire();
    size_t room = pipeline_.block_events() - cur_->events.size();
    size_t k = std::min(room, n);
    cur_->events.insert(cur_->events.end(), ev, ev + k);
    ev += k;
    n -= k;
    if (cur_->events.size() == pipeline_.block_events()) flush_block();
  }
}

void RingDrain::flush_block() {
  if (cur_ && !cur_->events.empty()) {
    pipeline_.submit(cur_);
    cur_ = nullptr;
  }
}

void RingDrain::loop() {
  while (!stop_.load()) {
    epoll_event ev[2];
    epoll_wait(epoll_fd_, ev, 2, poll_ms_);
    uint64_t n;
    ssize_t r = read(wake_fd_, &n, sizeof n);  // nonblocking: resets the eventfd if it fired
    (void)r;
    // Empties every ring, whichever woke us.
    if (rb_) ring_buffer__consume(rb_);
    if (flush_requested_.exchange(false)) flush_block();
  }
  // Probes are detached by now: what is left in the rings is final.
  while (rb_ && ring_buffer__consume(rb_) > 0) {
  }
  flush_block();
  if (cur_) pipeline_.give_back(cur_);  // acquired but still empty
  cur_ = nullptr;
}

}  // namespace cptrace
