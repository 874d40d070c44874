// `cptrace throughput --net`: bytes per period per connection, from the socket-level
// network events of `record --net` (sock_send_length / sock_recv_length: the bytes a
// sendmsg() accepted or a recvmsg() returned, i.e. what the application moved, not
// what the wire carried; retransmissions and headers are not in it). A connection is
// (protocol, local address:port, remote address:port) as the node saw it, one series
// per direction. Periods are aligned to the trace origin like `throughput`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/throughput.h"
#include "trace/trace_timeline.h"

namespace cptrace {

struct ConnectionSeries {
  std::string connection;  // "tcp 10.77.1.2:40000 <-> 10.77.2.2:7000" (local first)
  std::string direction;  // "send" or "recv"
  std::vector<uint64_t> bytes;  // bytes[i]: in period first + i
  uint64_t total = 0;
  uint64_t calls = 0;  // socket events summed
};

struct NetThroughput {
  Timeline tl;
  uint64_t period = 0;  // ticks
  double period_ms = 0;
  int64_t first = 0;
  size_t periods = 0;
  std::vector<ConnectionSeries> series;  // sorted by connection, then direction
  double period_start_s(size_t i) const { return tl.ticks_to_s(double(first + int64_t(i)) * double(period)); }
};

// One streaming pass over the Net frames. Throws std::runtime_error when the
// trace has no network events (recorded without --net).
NetThroughput compute_net_throughput(const TraceReader& r, const Timeline& tl, uint64_t period, double period_ms);
nlohmann::json net_throughput_json(const NetThroughput& t);
int run_net_throughput(const std::string& dir, double period_ms, Output output);

}  // namespace cptrace
