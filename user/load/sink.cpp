#include "load/sink.h"

#include <arpa/inet.h>
#include <immintrin.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "cptrace.h"
#include "load/net_endpoint.h"
#include "load/tuple_wire.h"
#include "clock/clock_now.h"
#include "os/time_units.h"
#include "os/say.h"

namespace cptrace {

namespace {

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char host[INET6_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  }
  return fmt::format("{}:{}", host, port);
}

}  // namespace

// A TCP connection: a byte buffer holding at most one partial tuple between reads.
struct SinkReceiver::Conn {
  int fd;
  std::string peer;
  std::vector<uint8_t> buf = std::vector<uint8_t>(256 << 10);
  size_t fill = 0;
  uint64_t offset = 0;  // stream offset of buf[0], for error messages
};

SinkReceiver::SinkReceiver(const SinkOptions& o, SinkState& st)
    : o_(o), st_(st), channel_(cp_open_channel(o.channel.c_str())) {
  data_fd_ = listen_on(o.bind, o.port, o.udp ? SOCK_DGRAM : SOCK_STREAM);
  if (o.udp) {
    int rcv = 4 << 20;  // bursts of a catching-up generator fit; a slow consumer still overflows it
    setsockopt(data_fd_, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof rcv);
  }
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{EPOLLIN, {.ptr = nullptr}};
  epoll_ctl(ep_, EPOLL_CTL_ADD, data_fd_, &ev);
}

SinkReceiver::~SinkReceiver() {
  for (Conn* c : conns_) {
    close(c->fd);
    delete c;
  }
  close(ep_);
  close(data_fd_);
}

void SinkReceiver::run() {
  epoll_event evs[64];
  while (!st_.stop.load()) {
    int n = epoll_wait(ep_, evs, 64, 50);
    for (int i = 0; i < n; ++i) {
      Conn* c = static_cast<Conn*>(evs[i].data.ptr);
      if (!c) {
        o_.udp ? read_udp() : accept_one();
        continue;
      }
      if (!read_tcp(*c)) {
        epoll_ctl(ep_, EPOLL_CTL_DEL, c->fd, nullptr);
        close(c->fd);
        std::erase(conns_, c);
        delete c;
      }
    }
  }
}

void SinkReceiver::accept_one() {
  int fd = accept4(data_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  auto* c = new Conn{fd, peer_name(fd)};
  conns_.push_back(c);
  epoll_event ev{EPOLLIN, {.ptr = c}};
  epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
}

// false: close the connection (EOF, error, or a stream that is not tuples).
bool SinkReceiver::read_tcp(Conn& c) {
  size_t room = c.buf.size() - c.fill;
  // A throttled consumer takes little at a time, so the backlog stays in the
  // kernel and TCP pushes back on the sender, as with a real slow consumer.
  if (o_.throttle > 0) room = std::min<size_t>(room, 4096);
  ssize_t r = recv(c.fd, c.buf.data() + c.fill, room, 0);
  if (r == 0) return false;
  if (r < 0) return errno == EAGAIN || errno == EINTR;
  c.fill += size_t(r);
  uint64_t ids[512];
  size_t n = 0, pos = 0;
  TupleHeader h;
  while (c.fill - pos >= kTupleMinSize) {
    if (!parse_header(c.buf.data() + pos, h, kTupleMaxTcp)) {
      st_.malformed++;
      say("{}: not a tuple at stream byte offset {} (magic 0x{:08x}, size {}); closing", c.peer, c.offset + pos,
          h.magic, h.size);
      consume(ids, n);
      return false;
    }
    if (c.fill - pos < h.size) {
      if (h.size > c.buf.size()) c.buf.resize(h.size);
      break;
    }
    ids[n++] = h.id;
    pos += h.size;
    if (n == 512) {
      consume(ids, n);
      n = 0;
    }
  }
  consume(ids, n);
  memmove(c.buf.data(), c.buf.data() + pos, c.fill - pos);
  c.fill -= pos;
  c.offset += pos;
  return true;
}

void SinkReceiver::read_udp() {
  constexpr unsigned kBatch = 32;
  static thread_local std::vector<uint8_t> bufs(size_t(kBatch) * 65536);
  mmsghdr m[kBatch];
  iovec iov[kBatch];
  unsigned want = o_.throttle > 0 ? 4 : kBatch;
  for (unsigned i = 0; i < want; ++i) {
    iov[i] = {bufs.data() + size_t(i) * 65536, 65536};
    m[i] = {};
    m[i].msg_hdr.msg_iov = &iov[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  int got = recvmmsg(data_fd_, m, want, MSG_DONTWAIT, nullptr);
  uint64_t ids[kBatch];
  size_t n = 0;
  for (int i = 0; i < got; ++i) {
    TupleHeader h;
    if (m[i].msg_len < kTupleMinSize || !parse_header(bufs.data() + size_t(i) * 65536, h, kTupleMaxUdp) ||
        h.size != m[i].msg_len) {
      st_.malformed++;
      continue;
    }
    ids[n++] = h.id;
  }
  consume(ids, n);
}

// Service time 1/throttle per tuple: the consumer is busy until next_free_ns_.
// The long-run rate never exceeds the throttle; idle time earns at most 100 ms
// of credit, so a wakeup delayed by a busy machine is caught up instead of
// silently lowering the service rate below the throttle.
void SinkReceiver::throttle_wait() {
  const int64_t period = int64_t(1e9 / o_.throttle);
  int64_t now = mono_ns();
  if (next_free_ns_ > now + 200000) {
    timespec ts = ns_timespec(next_free_ns_);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
  }
  while ((now = mono_ns()) < next_free_ns_) _mm_pause();
  next_free_ns_ = std::max(next_free_ns_, now - 100000000) + period;
}

void SinkReceiver::consume(const uint64_t* ids, size_t n) {
  if (!n) return;
  for (size_t i = 0; i < n; ++i) {
    if (o_.throttle > 0) throttle_wait();
    cp_logTS(channel_, ids[i]);
  }
  int64_t now = mono_ns();
  {
    std::lock_guard lk(st_.mu);
    for (size_t i = 0; i < n; ++i) st_.ledger.mark(ids[i]);
    st_.round_unique.store(st_.ledger.unique(), std::memory_order_relaxed);
  }
  st_.received += n;
  int64_t zero = 0;
  st_.first_rx_ns.compare_exchange_strong(zero, now);
  st_.last_rx_ns = now;
}

}  // namespace cptrace
