// `cptrace record --net`: loads bpf/netcap.bpf.c with its filters, gives it one
// ring buffer per CPU, attaches the socket and packet tracepoints, and drains the
// rings into Net frames (user/trace/net_codec.h) handed to the block pipeline.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "collect/block_pipeline.h"
#include "collect/ring_waiter.h"
#include "cptrace_net.h"
#include "trace/trace_format.h"

struct netcap_bpf;
struct bpf_link;
struct ring_buffer;

namespace cptrace {

struct NetOptions {
  bool enabled = false;  // --net
  std::string netns;  // --netns PATH|self ("" = every namespace)
  std::string cgroup;  // --cgroup PATH (cgroup v2 directory)
  uint32_t pid = 0;  // owner tgid filter (record -p / -- CMD)
  int followed_map_fd = -1;  // or: owner in this tgid set (the followed tree)
  std::vector<uint16_t> ports;  // --port N (either end)
  // --net-send-calls: stamp the entry of every send call and hash each UDP
  // message in the caller's buffer on send and receive (netlat --writes); a
  // cost on every system call of the machine while recording, so asked for.
  bool send_calls = false;
  uint32_t ring_bytes = 16u << 20;  // per CPU, power of two
  int zstd_level = 1;
};

// Resolved filters: what the BPF side compares against.
struct NetFilters {
  uint32_t netns = 0;  // inode of the network namespace
  uint64_t cgroup = 0;  // cgroup v2 id (inode of the directory)
};
// Throws std::runtime_error naming the flag and value when a path is not a
// network namespace / cgroup v2 directory.
NetFilters resolve_net_filters(const NetOptions& opt);

class NetCapture {
 public:
  // One line per part of the capture this kernel cannot run (its tracepoint
  // is missing), for record's first lines and `cptrace check`.
  const std::vector<std::string>& missing() const { return missing_; }
  // Loads the programs (errors before any trace file exists); attaches nothing.
  explicit NetCapture(const NetOptions& opt);
  ~NetCapture();
  NetCapture(const NetCapture&) = delete;
  NetCapture& operator=(const NetCapture&) = delete;

  // Attaches the programs and starts the drain thread, which hands Net frames to `pipe`.
  void start(BlockPipeline& pipe);
  // Hands the records drained so far on as a frame (periodic flush).
  void request_flush() {
    flush_requested_.store(true);
    if (waiter_) waiter_->wake();
  }
  // Detaches, drains what is left, writes the last frame, stops the thread.
  void stop();

  // Per-CPU {"seen": [...], "dropped": [...]} from the BPF counters.
  Counters read_counters() const;
  nlohmann::json counters_json() const;
  // What was asked, for meta.json: {"netns":..,"cgroup":..,"pid":..,"ports":[..]},
  // and where packets are stamped: "tx_stamp" (a tracepoint) and "rx_stamp" (the
  // receive entry points whose programs are loaded, a receive taking the stamp of
  // the one it passed; netif_receive_skb last, for receives that passed none or
  // grew in GRO after it).
  const std::vector<std::string>& rx_stamp() const { return rx_stamp_; }
  nlohmann::json describe() const;
  uint64_t recorded() const { return recorded_.load(); }
  uint64_t malformed() const { return malformed_.load(); }

 private:
  void skip_missing_tracepoints();
  std::vector<std::string> missing_;
  std::vector<std::string> rx_stamp_;
  static int on_record(void* ctx, void* data, size_t size);
  void read_rings();
  void loop();
  void flush();

  NetOptions opt_;
  NetFilters filt_;
  BlockPipeline* pipe_ = nullptr;
  netcap_bpf* skel_ = nullptr;
  std::vector<int> ring_fds_;
  std::vector<bpf_link*> links_;
  ring_buffer* rb_ = nullptr;
  std::unique_ptr<RingWaiter> waiter_;  // the rings, flush and stop requests
  std::vector<cp_net_rec> pending_;
  std::atomic<bool> stop_{false}, flush_requested_{false};
  std::atomic<uint64_t> recorded_{0}, malformed_{0};
  std::thread thread_;
};

}  // namespace cptrace
