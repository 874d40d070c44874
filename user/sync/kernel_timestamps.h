// Kernel (software) packet timestamps with SO_TIMESTAMPING, and their conversion
// into this node's TSC.
//
// The kernel stamps a datagram when the device transmits it (skb_tx_timestamp in
// the driver: veth, loopback and real NICs call it) and when it enters the stack
// on receive — so the scheduling delay of the process that sent or reads it is
// not in the stamp. Software stamps are CLOCK_REALTIME. CLOCK_REALTIME is
// CLOCK_MONOTONIC plus an offset the kernel changes only when the clock is STEPPED
// (both are slewed alike), so a stamp converts exactly with that offset, which we
// bracket from user space before and after each round; when the two brackets do
// not overlap, the clock was stepped in between and the round's stamps are not
// trusted (kernel_ok = false). CLOCK_MONOTONIC then goes to TSC through two
// correlation points taken around the round, then through the simulated
// transform (test only).
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>

#include "clock/clock_transform.h"
#include "trace/trace_format.h"

namespace cptrace {

uint64_t rdtsc_now();

// CLOCK_REALTIME - CLOCK_MONOTONIC in ns, as an interval known to contain it.
struct RealMonoOffset {
  int64_t lo = 0, hi = 0;
  int64_t mid() const { return lo + (hi - lo) / 2; }
};
// Intersection of `brackets` mono/real/mono brackets.
RealMonoOffset sample_real_mono_offset(int brackets = 5);

// Everything needed to turn kernel stamps taken between `before` and `after`
// into TSC ticks of this node.
struct StampClock {
  ClockPoint before, after;
  RealMonoOffset off_before, off_after;
  const ClockTransform* sim = nullptr;

  void sample_before();
  void sample_after();
  // False when the clock was stepped between the two samples (or the points do
  // not advance), i.e. realtime stamps cannot be trusted.
  bool consistent() const;
  // CLOCK_REALTIME ns (kernel stamp) -> TSC (with the simulated transform).
  uint64_t realtime_to_tsc(uint64_t rt_ns) const;
  // Raw rdtsc -> TSC as written (simulated transform).
  uint64_t user_tsc(uint64_t raw) const { return sim ? sim->apply(raw) : raw; }
};

// A UDP socket of `family` with software timestamping on (tx and/or rx). A socket
// without rx stamps is send-only: it drops every datagram sent to it.
// Throws std::runtime_error with the errno text.
int open_stamped_udp(int family, bool tx_stamps, bool rx_stamps);

// recvmsg with the kernel receive stamp (CLOCK_REALTIME ns, 0 when the kernel gave
// none). Returns the datagram length, or -1 (errno set).
ssize_t recv_stamped(int fd, void* buf, size_t len, sockaddr_storage* from, socklen_t* fromlen, uint64_t* rt_ns,
                     int flags = 0);

// Reads transmit stamps from the socket's error queue until the one with OPT_ID
// `id` shows up (earlier ids are discarded), waiting at most timeout_ms. Returns
// its CLOCK_REALTIME ns, or nullopt.
std::optional<uint64_t> read_tx_stamp(int fd, uint32_t id, int timeout_ms);

// "HOST:PORT", "[V6]:PORT", "HOST" (default port) -> address. Names are resolved
// (getaddrinfo, UDP). Throws std::invalid_argument naming `what` and the text.
sockaddr_storage parse_endpoint(const std::string& text, uint16_t default_port, const std::string& what,
                                socklen_t* len);
std::string endpoint_string(const sockaddr_storage& a);
socklen_t sockaddr_len(const sockaddr_storage& a);

}  // namespace cptrace
