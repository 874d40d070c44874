#include "load/generator.h"

#include <immintrin.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "cptrace.h"
#include "load/tuple_wire.h"
#include "clock/clock_now.h"
#include "os/time_units.h"

namespace cptrace {

namespace {

// Slot of tuple j, from j itself: no accumulated rounding, no drift.
struct Schedule {
  int64_t start;
  long double ns_per_tuple;
  int64_t slot(uint64_t j) const { return start + int64_t((long double)j * ns_per_tuple); }
};

struct ThreadResult {
  uint64_t emitted = 0, errors = 0;
  int64_t last = INT64_MIN;
  int64_t blocked_ns = 0;
  bool stopped = false;
  std::string error;
  LatenessHist late;
};

// One emitting thread: its own socket, tuples t, t+N, ...
class Emitter {
 public:
  Emitter(const GenOptions& o, int fd, unsigned t, const Schedule& s, uint64_t n, const std::atomic<bool>* stop)
      : o_(o), fd_(fd), t_(t), s_(s), n_(n), stop_(stop), buf_(preserialize(o.size, std::max(1u, o.batch))) {}

  void run() {
    uint64_t ch = cp_open_channel(o_.channel.c_str());
    const uint64_t step = o_.threads;
    std::vector<int64_t> slots(std::max(1u, o_.batch));
    for (uint64_t j = t_; j < n_;) {
      if (stop_ && stop_->load(std::memory_order_relaxed)) {
        r_.stopped = true;
        break;
      }
      slots[0] = s_.slot(j);
      int64_t now = mono_ns();
      while (now < slots[0]) {  // the per-tuple time budget: spin to the slot
        _mm_pause();
        now = mono_ns();
      }
      // Behind schedule: every slot already due may go in this one write.
      unsigned k = 1;
      while (k < o_.batch && j + k * step < n_ && (slots[k] = s_.slot(j + k * step)) <= now) k++;
      for (unsigned i = 0; i < k; ++i) {
        uint64_t id = o_.first_id + j + i * step;
        patch_id(buf_.data() + size_t(i) * o_.size, id);
        cp_logTS(ch, id);
        r_.late.record(now - slots[i]);
      }
      if (!send_tuples(k)) break;
      r_.last = now;
      j += k * step;
    }
  }
  ThreadResult& result() { return r_; }

 private:
  bool send_tuples(unsigned k) { return o_.udp ? send_udp(k) : send_tcp(k); }

  bool send_udp(unsigned k) {
    mmsghdr m[64];
    iovec iov[64];
    for (unsigned done = 0; done < k;) {
      unsigned c = std::min(k - done, 64u);
      for (unsigned i = 0; i < c; ++i) {
        iov[i] = {buf_.data() + size_t(done + i) * o_.size, o_.size};
        m[i] = {};
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
      }
      int sent = sendmmsg(fd_, m, c, 0);
      if (sent < 0) {
        if (errno == EINTR) continue;
        // Refused (nobody listens yet/any more) or no buffer: this tuple is not emitted.
        if (errno == ECONNREFUSED || errno == ENOBUFS || errno == EAGAIN) {
          r_.errors++;
          done++;
          continue;
        }
        r_.error = fmt::format("thread {}: send: {}", t_, strerror(errno));
        return false;
      }
      r_.emitted += unsigned(sent);
      done += unsigned(sent);
    }
    return true;
  }

  // Non-blocking writes; time spent waiting for room is backpressure from the
  // receiver (blocked_ns), reported apart from the generator's own lateness.
  bool send_tcp(unsigned k) {
    const uint8_t* p = buf_.data();
    size_t left = size_t(k) * o_.size;
    while (left) {
      ssize_t w = send(fd_, p, left, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        p += w;
        left -= size_t(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        int64_t t0 = mono_ns();
        pollfd pf{fd_, POLLOUT, 0};
        poll(&pf, 1, 100);
        r_.blocked_ns += mono_ns() - t0;
        if (stop_ && stop_->load(std::memory_order_relaxed)) {
          r_.stopped = true;
          r_.emitted += (size_t(k) * o_.size - left) / o_.size;
          return false;
        }
        continue;
      }
      r_.error = fmt::format("thread {}: send: {}", t_, w < 0 ? strerror(errno) : "connection closed");
      r_.emitted += (size_t(k) * o_.size - left) / o_.size;
      return false;
    }
    r_.emitted += k;
    return true;
  }

  const GenOptions& o_;
  int fd_;
  unsigned t_;
  Schedule s_;
  uint64_t n_;
  const std::atomic<bool>* stop_;
  std::vector<uint8_t> buf_;
  ThreadResult r_;
};

int open_data_socket(const GenOptions& o) {
  int fd = connect_to(o.to, o.udp ? SOCK_DGRAM : SOCK_STREAM);
  if (!o.udp) {
    int one = 1;  // each tuple leaves at its slot, not when Nagle decides
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

}  // namespace

nlohmann::json GenReport::to_json() const {
  return {{"scheduled", scheduled},
          {"emitted", emitted},
          {"send_errors", send_errors},
          {"elapsed_s", elapsed_s},
          {"achieved_rate", achieved_rate},
          {"blocked_s", blocked_s},
          {"stopped_early", stopped_early},
          {"error", error},
          {"lateness_ns",
           {{"p50", lateness.quantile(0.5)},
            {"p99", lateness.quantile(0.99)},
            {"p999", lateness.quantile(0.999)},
            {"max", lateness.max()}}}};
}

uint64_t slot_count(double rate, double duration_s) { return uint64_t(std::ceil(rate * duration_s - 1e-9)); }

void validate(const GenOptions& o) {
  if (!(o.rate > 0) || !std::isfinite(o.rate))
    throw std::runtime_error(fmt::format("--rate {}: must be a positive number of tuples/s", o.rate));
  if (!(o.duration_s > 0) || !std::isfinite(o.duration_s))
    throw std::runtime_error(fmt::format("--duration {}: must be a positive number of seconds", o.duration_s));
  uint32_t max = o.udp ? kTupleMaxUdp : kTupleMaxTcp;
  if (o.size < kTupleMinSize || o.size > max)
    throw std::runtime_error(
        fmt::format("--size {}: must be {}..{} bytes{}", o.size, kTupleMinSize, max, o.udp ? " for UDP" : ""));
  if (o.threads < 1 || o.threads > 256)
    throw std::runtime_error(fmt::format("--threads {}: must be 1..256", o.threads));
  if (o.batch < 1 || o.batch > 1024) throw std::runtime_error(fmt::format("--batch {}: must be 1..1024", o.batch));
  if (slot_count(o.rate, o.duration_s) == 0) throw std::runtime_error("--rate x --duration: no tuple to emit");
}

GenReport run_generator(const GenOptions& o, const std::atomic<bool>* stop) {
  validate(o);
  GenReport rep;
  rep.scheduled = slot_count(o.rate, o.duration_s);
  std::vector<int> fds;
  try {
    for (unsigned t = 0; t < o.threads; ++t) fds.push_back(open_data_socket(o));
  } catch (...) {
    for (int fd : fds) close(fd);
    throw;
  }
  // A common start a little ahead, so every thread is spinning before slot 0.
  Schedule s{mono_ns() + 20000000, 1e9L / (long double)o.rate};
  std::vector<std::unique_ptr<Emitter>> em;
  for (unsigned t = 0; t < o.threads; ++t)
    em.push_back(std::make_unique<Emitter>(o, fds[t], t, s, rep.scheduled, stop));
  std::vector<std::thread> th;
  for (auto& e : em) th.emplace_back([&e] { e->run(); });
  for (auto& t : th) t.join();
  for (int fd : fds) close(fd);

  int64_t last = INT64_MIN;
  for (auto& e : em) {
    auto& r = e->result();
    rep.emitted += r.emitted;
    rep.send_errors += r.errors;
    rep.blocked_s += ns_to_seconds(r.blocked_ns);
    rep.stopped_early |= r.stopped;
    if (rep.error.empty()) rep.error = r.error;
    rep.lateness.merge(r.late);
    last = std::max(last, r.last);
  }
  // From slot 0 (not the first emission: a late start that catches up must not
  // look faster than the schedule) to the last emission.
  if (rep.emitted > 1 && last > s.start) {
    rep.elapsed_s = ns_to_seconds(last - s.start);
    rep.achieved_rate = double(rep.emitted - 1) / rep.elapsed_s;
  }
  return rep;
}

}  // namespace cptrace
