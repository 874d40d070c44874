// `cptrace record`: probes -> ring drain -> block pipeline -> trace writer,
// plus the clock-correlation stream, channel table and counters.
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

#include "sync/minrtt_record.h"
#include "net/net_capture.h"

namespace cptrace {

struct RecordOptions {
  std::string out_dir;
  std::vector<std::string> libs;  // explicit targets (--lib)
  double duration_s = 0;  // 0: until SIGINT/SIGTERM (or the command exits)
  pid_t pid = 0;  // -p: late attach to this process
  std::vector<std::string> cmd;  // -- CMD ARGS...: run and record it
  bool inherit = true;  // -p / -- CMD: also the children forked from then on
  bool all = false;  // --all: every process of the node using a file with probe sites (record/node_watch.h)
  std::string node;  // node name (default: host name)
  bool overwrite = false;
  bool progress = true;  // progress line when stderr is a terminal
  unsigned compressors = 1;
  uint32_t ring_mb = 0;  // per CPU, MiB; 0: default_ring_mb()
  uint32_t net_ring_mb = 0;  // --net rings per CPU, MiB; 0: ring_mb when given, else kNetRingMb
  uint32_t wakeup_kib = 0;  // wake the drain past this fill of a CPU's ring (0: a quarter of it)
  uint32_t block_events = 16384;  // events per compressed frame
  int zstd_level = 1;
  // Event frames at this level while compressing keeps a compressor busy
  // (collect/block_pipeline.h set_fast_level); equal to zstd_level: never.
  int zstd_fast_level = -5;
  double flush_s = 0.5;  // a killed recorder loses at most this much
  std::string config_file;  // --config: channel handler rules (user/probe/handlers.h)
  std::string control_socket;  // --control-socket (default: OUT_DIR/control.sock)
  MinrttRecordOptions minrtt;  // --peers, --minrtt-listen, --sync-*, --key, --simulate-clock
  NetOptions net;  // --net and its filters (net_capture.h)
  // The skew across CPUs measured while recording, every this many seconds
  // (0: at start and stop only): clock/skew_watch.h.
  double skew_period_s = 5;
};

// Returns the process exit status for main(). Throws on setup errors.
// The ring size per CPU when --ring-mb is not given (MiB, a power of two).
uint32_t default_ring_mb();

// The --net rings per CPU without --ring-mb (MiB). A network record is 104
// bytes: the drain wakes at a quarter (4 MiB, 40 K records), and the 12 MiB
// beyond hold 121 ms of 1 M records/s on one CPU, the most the network path
// produced on the 2-vCPU development VM (both CPUs, docs/net.md). The user
// event rings' 64 MiB are sized for 40 M events/s, which no network path
// reaches.
inline constexpr uint32_t kNetRingMb = 16;

int run_record(const RecordOptions& opt);

}  // namespace cptrace
