// `cptrace sink`: receives the generator's tuples (TCP or UDP), logs cp_logTS on
// receipt, checks every id for gaps and duplicates, optionally consumes no faster
// than a known rate (--throttle: a slow consumer, what maxrate must detect), and
// serves control rounds (sink_control.h) on a TCP port beside the data port.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "load/id_ledger.h"

namespace cptrace {

struct SinkOptions {
  uint16_t port = 0;
  std::string bind;  // address to bind (default: all)
  bool udp = false;
  double throttle = 0;  // tuples/s the consumer serves at most (0: as fast as it can)
  uint16_t control_port = 0;  // 0: port + 1
  unsigned rounds = 0;  // exit after this many control rounds (0: no limit)
  double duration_s = 0;  // exit after this long (0: no limit)
  std::string channel = "sink.recv";
  double drain_idle_s = 1.0;  // end of round: give up waiting after this long without a tuple
  double drain_max_s = 60;  // ... or after this long in all
  bool json = false;
};

// State shared by the data path and the control server.
struct SinkState {
  std::mutex mu;  // guards ledger, round fields
  IdLedger ledger;
  bool in_round = false;
  unsigned rounds_done = 0;
  nlohmann::json round_log = nlohmann::json::array();
  std::atomic<uint64_t> received{0};  // every tuple since start
  std::atomic<uint64_t> round_unique{0};  // unique ids of the current round
  std::atomic<uint64_t> malformed{0};
  std::atomic<int64_t> first_rx_ns{0}, last_rx_ns{0};
  std::atomic<bool> stop{false};
};

// The sink's data path (one thread, epoll over every connection), run by the
// `sink` command (cli/cmd_sink.cpp).
class SinkReceiver {
 public:
  SinkReceiver(const SinkOptions& o, SinkState& st);
  ~SinkReceiver();
  void run();  // until st.stop

 private:
  struct Conn;
  void accept_one();
  bool read_tcp(Conn& c);
  void read_udp();
  void consume(const uint64_t* ids, size_t n);
  void throttle_wait();

  const SinkOptions& o_;
  SinkState& st_;
  int data_fd_ = -1, ep_ = -1;
  uint64_t channel_;
  int64_t next_free_ns_ = 0;  // throttle: when the consumer may take the next tuple
  std::vector<Conn*> conns_;
};

}  // namespace cptrace
