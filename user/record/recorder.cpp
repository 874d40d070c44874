#include "record/recorder.h"

#include "cptrace_records.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "probe/attach_targets.h"
#include "probe/capabilities.h"
#include "collect/block_pipeline.h"
#include "probe/handlers.h"
#include "probe/kernel_features.h"
#include "probe/probe_attach.h"
#include "probe/proc_registry.h"
#include "collect/ring_drain.h"
#include "cptrace_registry.h"
#include "record/channel_table.h"
#include "record/node_watch.h"
#include "record/process_follower.h"
#include "record/control_socket.h"
#include "record/correlation_keeper.h"
#include "record/held_command.h"
#include "record/namespace_pids.h"
#include "clock/clock_schedule.h"
#include "record/clock_stream.h"
#include "record/skew_turn.h"
#include "clock/skew_watch.h"
#include "clock/tsc_skew.h"
#include "sync/minrtt_record.h"
#include "clock/clock_now.h"
#include "trace/json_text.h"
#include "os/node_info.h"
#include "trace/trace_writer.h"
#include "os/stop_signals.h"
#include "clock/tsc_verdict.h"
#include "os/exit_watch.h"
#include "os/say.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cptrace {

namespace {

// Disk space set aside at start for the frames and meta.json written at stop,
// so a recording that fills the disk can still end with its accounting.
constexpr uint64_t kStopReserveBytes = 256 << 10;

// The block pipeline starts with 64 blocks (about 1 M events at the default
// size, 26 ms at 40 M events/s) and grows while compression or the disk falls
// behind, up to an eighth of the machine's memory and at most 1 GiB of recorded
// events (0.7 s at 40 M events/s): stalls of that length were measured on a
// shared 2-vCPU machine (docs/record.md), and the rings behind the drain hold
// far less.
constexpr size_t kInitialBlocks = 64;
size_t collector_max_blocks(size_t block_events) {
  uint64_t ram = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  uint64_t cap = std::min<uint64_t>(ram / 8, uint64_t(1) << 30);
  uint64_t block_bytes = block_events * (3 * sizeof(uint64_t) + sizeof(EventRun));
  return std::max<size_t>(kInitialBlocks, cap / block_bytes);
}

// A ring holds what arrives while the drain is not draining it. On the shared
// 2-vCPU VM the drain was measured descheduled or busy for 100+ ms during
// a pass (meta.json "collector"), while the paced emitter, late after its own
// stall, catches up at full speed: 16 MiB (2.7 M batch events, 70 ms at
// 40 M events/s) dropped in some runs at every rate. 64 MiB per CPU holds
// 280 ms at 40 M events/s where the machine can spare it: the rings take at
// most 1/64 of its memory (floored to a power of two), never less than the
// former 16 MiB. The wakeup stays at 4 MiB (docs/record.md: the cost is flat
// from 1 MiB up), so the rest of the ring is headroom for a late drain.
uint32_t ring_mb_for_this_machine() {
  uint64_t ram = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
  uint64_t per_cpu_mb = ram / 64 / uint64_t(cpus) >> 20;
  uint32_t mb = 16;
  while (mb < 64 && uint64_t(mb) * 2 <= per_cpu_mb) mb *= 2;
  return mb;
}

// This process's CPU time so far (all its threads: drain, compressors, writer,
// clock stream, MinRTT), user and system, in seconds.
std::pair<double, double> own_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return {s(u.ru_utime), s(u.ru_stime)};
}

// meta.json "collector": the stalls the drain and the pipeline saw (figures
// for bench/zero_drop.py; the counters are always on, a few per block).
// net_ring_bytes: each --net ring (0: no network capture).
json collector_json(const DrainStats& d, const BlockPipeline& pipe, std::optional<double> first_drop_s,
                    uint64_t net_ring_bytes) {
  auto ms = [](uint64_t ns) { return std::round(ns / 1e4) / 100; };
  const PipelineStats& p = pipe.stats();
  json j = {{"drain",
             {{"passes", d.passes},
              {"max_gap_ms", ms(d.max_gap_ns)},
              {"max_pass_ms", ms(d.max_pass_ns)},
              {"ring_bytes", d.ring_bytes},
              {"ring_peak_bytes", d.ring_peak_bytes},
              {"ring_peak_after_bytes", d.ring_peak_after_bytes},
              {"run_delay_ms", ms(d.run_delay_ns)},
              {"nice", d.nice}}},
            {"pipeline",
             {{"block_waits", p.producer_waits.load()},
              {"block_wait_ms", ms(p.producer_wait_ns)},
              {"max_block_wait_ms", ms(p.max_producer_wait_ns)},
              {"blocks", pipe.blocks()},
              {"blocks_cap", pipe.max_blocks()},
              {"blocks_grown", p.blocks_grown.load()},
              {"blocks_released", p.blocks_released.load()},
              {"grown_by_drain", p.grown_by_producer.load()},
              {"blocks_peak", p.blocks_peak.load()},
              {"ready_peak", p.ready_peak.load()},
              {"write_queue_peak", p.done_peak.load()},
              {"max_compress_ms", ms(p.max_compress_ns)},
              {"fast_frames", p.fast_frames.load()},
              {"write_ms", ms(p.write_ns)},
              {"max_write_ms", ms(p.max_write_ns)}}}};
  if (first_drop_s) j["first_drop_s"] = std::round(*first_drop_s * 10) / 10;
  if (net_ring_bytes) j["net_ring_bytes"] = net_ring_bytes;
  for (const DrainStats::DropPass& dp : d.drop_passes)
    j["drain"]["drop_passes"].push_back({{"at_ms", dp.at_ms},
                                         {"gap_ms", dp.gap_ms},
                                         {"ring_pct", dp.ring_pct},
                                         {"pass_ms", dp.pass_ms},
                                         {"gap_delay_ms", dp.gap_delay_ms},
                                         {"pass_delay_ms", dp.pass_delay_ms},
                                         {"dropped", dp.dropped}});
  return j;
}

json counters_json(const Counters& c) {
  return {{"seen", c.seen}, {"dropped", c.dropped}, {"filtered", c.filtered}, {"series_lost", c.series_lost}};
}

// Events the handlers still held in BPF maps at stop (probe/handlers.h).
void submit_events(BlockPipeline& pipe, const std::vector<TraceEvent>& ev) {
  for (size_t i = 0; i < ev.size();) {
    Block* b = pipe.acquire();
    size_t k = std::min(ev.size() - i, pipe.block_events());
    b->events.assign(ev.begin() + i, ev.begin() + i + k);
    pipe.submit(b);
    i += k;
  }
}

// A --lib must be an ELF file defining cp_logTS; checked here, before the BPF
// programs load, because libbpf would report a wrong file only as a bare error
// code ("Unknown error 4001").
void check_lib(const std::string& path) {
  std::optional<uint64_t> at;
  try {
    at = elf_symbol_file_offset(path, "cp_logTS");
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("--lib {}: not an ELF shared object or executable ({})", path, e.what()));
  }
  if (!at)
    throw std::runtime_error(fmt::format(
        "--lib {}: an ELF file without a cp_logTS symbol (not libcptrace.so, libcptrace_jni.so or a program linked "
        "with libcptrace.a)",
        path));
}

// One path per file: a library named twice (its host path and the same file
// through /proc/PID/root) would get every probe twice, every event recorded twice.
std::vector<std::string> unique_files(std::vector<std::string> paths) {
  std::vector<std::string> out;
  for (auto& p : paths)
    if (std::none_of(out.begin(), out.end(), [&](const std::string& q) { return same_file(p, q); }))
      out.push_back(std::move(p));
  return out;
}

// The ELF files to attach to: --lib, else those of -p's process or of CMD.
std::vector<std::string> resolve_targets(const RecordOptions& opt) {
  for (const std::string& lib : opt.libs) check_lib(lib);
  std::vector<std::string> t = opt.libs;
  if (t.empty() && opt.pid) t = targets_of_process(opt.pid);
  if (t.empty() && !opt.cmd.empty()) t = targets_of_command(opt.cmd[0]);
  if (t.empty() && opt.net.enabled) return t;  // network only
  if (t.empty()) {
    if (opt.pid)
      throw std::runtime_error(
          fmt::format("-p {}: no mapped file of the process defines cp_logTS (does it use libcptrace?); "
                      "name the library with --lib",
                      opt.pid));
    if (!opt.cmd.empty())
      throw std::runtime_error(
          fmt::format("{}: neither the executable nor its shared libraries define cp_logTS; name the "
                      "library with --lib (needed when it is loaded with dlopen, e.g. by a JVM)",
                      opt.cmd[0]));
    throw std::runtime_error("nothing to attach to: give --lib PATH, -p PID or -- CMD");
  }
  for (auto& p : t) p = shown_path(p);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return unique_files(std::move(t));
}

// What to record, decided before anything is started: contradictory options,
// a bad config file and missing targets all stop us here.
struct RecordPlan {
  std::vector<ConfigRule> rules;
  std::vector<std::string> targets;
  TscVerdict tsc;
};

// Every bound the trace will give rests on the TSC. One the kernel distrusts
// is recorded and checked by cptrace itself: the skew across CPUs at start,
// every --skew-period and at stop (a TSC that drifts leaves its interval), and
// each clock segment's rate against CLOCK_MONOTONIC(_RAW) (clock_bounds.h).
TscVerdict check_tsc_verdict(const RecordOptions& opt) {
  TscVerdict v = read_tsc_verdict();
  if (v.trust == TscTrust::Distrusted)
    say("the kernel distrusts the TSC ({}); recording, and checking it: the skew across "
        "CPUs {}, each clock segment's rate (`cptrace info` says what held)",
        v.reason,
        opt.skew_period_s > 0 ? fmt::format("at start, every {:g} s and at stop", opt.skew_period_s)
                              : std::string("at start and at stop (--skew-period 0)"));
  return v;
}

// [lo, hi] ticks holding TSC_k - TSC_ref for every CPU k; null when some CPU
// was not measured, as no interval then holds for it.
json skew_interval(const TscSkew& s) {
  auto w = s.widest();
  return w ? json::array({w->first, w->second}) : json(nullptr);
}

// meta.json "tsc": the kernel's verdict and the skew across CPUs measured at
// start and (once stopped) at stop; docs/record.md.
json tsc_meta(const TscVerdict& v, double period_s, const TscSkew& start, const std::vector<TscSkew>& periodic,
              const std::optional<TscSkew>& stop) {
  json j = {{"verdict", v.name()}, {"reason", v.reason}};
  j["skew_ticks"] = {{"at_start", skew_interval(start)}, {"at_stop", stop ? skew_interval(*stop) : json(nullptr)}};
  j["skew"] = {{"at_start", start.to_json()}, {"at_stop", stop ? stop->to_json() : json(nullptr)}};
  j["skew"]["period_s"] = period_s;
  j["skew"]["periodic"] = json::array();
  for (const TscSkew& s : periodic) j["skew"]["periodic"].push_back(s.to_json());
  return j;
}

// Options that contradict each other across groups, checked before anything
// is created or run.
void check_record_options(const RecordOptions& opt) {
  check_minrtt_auth(opt.minrtt);
  uint32_t ring_mb = opt.ring_mb ? opt.ring_mb : ring_mb_for_this_machine();
  if (uint64_t(opt.wakeup_kib) > uint64_t(ring_mb) << 10)
    throw std::runtime_error("--wakeup-kib " + std::to_string(opt.wakeup_kib) + ": more than a CPU's ring (--ring-mb " +
                             std::to_string(ring_mb) + ")");
}

RecordPlan plan_recording(const RecordOptions& opt) {
  if (opt.pid && !opt.cmd.empty()) throw std::runtime_error("-p and -- CMD exclude each other");
  if (opt.all && (opt.pid || !opt.cmd.empty() || !opt.libs.empty()))
    throw std::runtime_error("--all records every instrumented process: it excludes -p, -- CMD and --lib");
  if (opt.pid && kill(opt.pid, 0) != 0)
    throw std::runtime_error(fmt::format("-p {}: no such process ({})", opt.pid, strerror(errno)));
  if (opt.duration_s < 0) throw std::runtime_error("--duration must be >= 0");
  RecordPlan plan;
  if (!opt.config_file.empty()) plan.rules = parse_config_file(opt.config_file);
  if (!opt.net.enabled && (!opt.net.netns.empty() || !opt.net.cgroup.empty() || !opt.net.ports.empty()))
    throw std::runtime_error("--netns, --cgroup and --port filter network capture: add --net");
  if (!opt.all) plan.targets = resolve_targets(opt);  // --all: found at the start (record/node_watch.h)
  if (opt.all) require_node_wide_capabilities();  // before anything starts: no empty trace
  plan.tsc = check_tsc_verdict(opt);
  return plan;
}

// One recording, stage by stage (run_record below calls them in order). The
// members are declared in the order the stages create them, so they are
// destroyed in reverse: the drain before the pipeline it feeds, the pipeline
// before the writer it writes to, the probes after everything reading them.
class Recording {
 public:
  Recording(const RecordOptions& opt, RecordPlan plan);
  void load_and_attach();
  void open_trace();
  void start_drains();
  void run();
  void stop_and_flush();
  void write_summary();
  int exit_status() const;

 private:
  void stop_sources();
  uint64_t drain_the_rest();
  void write_the_end(uint64_t held_series);
  void flush_side_frames(const Counters& counts);
  json net_counters_json() const;
  void count_discarded();
  void write_last_frames();
  void report_write_failure() const;
  void announce_write_failure() const;
  const char* stop_reason() const;
  bool target_gone();
  int stopped_by() const { return stop_ ? stop_->signal() : 0; }  // SIGINT, SIGTERM or 0
  void finish_meta(uint64_t held_series_points);

  const RecordOptions& opt_;
  std::vector<std::string> targets_;
  std::vector<ConfigRule> rules_;
  TscVerdict tsc_verdict_;
  TscSkew skew_start_;  // measured while the command is still held
  std::optional<TscSkew> skew_stop_;  // measured once the command is gone
  std::unique_ptr<SkewWatch> skew_watch_;  // between the two
  std::vector<TscSkew> skew_periodic_;  // what it measured
  std::unique_ptr<HeldCommand> child_;
  std::unique_ptr<ExitWatch> target_exit_;  // the command's or -p process's end wakes run()
  uint32_t filter_ = 0;  // tgid the probes keep (0: all processes)
  std::unique_ptr<ClockStream> clock_;  // from load_and_attach() on
  std::unique_ptr<HandlerTable> handlers_;
  std::unique_ptr<Probes> probes_;
  NamespacePids ns_pids_;  // before follower_ and drain_, which feed it
  std::unique_ptr<ProcessFollower> follower_;  // goes before probes_
  std::unique_ptr<NodeWatch> node_watch_;  // record --all; goes before probes_
  std::unique_ptr<NetCapture> net_;
  std::unique_ptr<MinrttRecording> minrtt_;
  std::vector<SyncRound> sync_rounds_;
  json meta_;
  std::unique_ptr<TraceWriter> writer_;
  std::unique_ptr<BlockPipeline> pipe_;
  ChannelTable channels_;
  std::unique_ptr<ControlSocket> control_;
  std::unique_ptr<RingDrain> drain_;
  std::unique_ptr<StopSignals> stop_;  // from start_drains() on; the handlers restored with it
  bool command_ended_ = false;  // the command exited on its own
  uint64_t recorded_ = 0;
  Counters final_counts_;
  // The recorder's own CPU time from attach to the summary: what recording cost
  // this machine per event, beside what cp_logTS cost the program.
  std::pair<double, double> cpu_at_attach_{0, 0}, cpu_attached_{0, 0};
  std::optional<double> first_drop_s_;  // when a flush first saw a drop (seconds since the start)
};

// The command is forked now, held until start_drains(): its pid filters the probes.
Recording::Recording(const RecordOptions& opt, RecordPlan plan)
    : opt_(opt), targets_(std::move(plan.targets)), rules_(std::move(plan.rules)), tsc_verdict_(std::move(plan.tsc)) {
  if (!opt.cmd.empty()) child_ = std::make_unique<HeldCommand>(opt.cmd);
  filter_ = opt.pid ? uint32_t(opt.pid) : child_ ? uint32_t(child_->pid()) : 0;
  if (filter_) target_exit_ = std::make_unique<ExitWatch>(pid_t(filter_));
}

// The clock stream first (its two points are taken before attaching, as
// `counter` handlers need the TSC rate), then the probes (handlers installed
// before attach) and the network capture.
void Recording::load_and_attach() {
  clock_ = std::make_unique<ClockStream>(opt_.minrtt.simulate_clock, ClockStream::Witness::On);
  double tsc_hz = clock_->raw_tsc_hz();

  ProbeOptions po;
  po.targets = targets_;
  po.filter_tgid = filter_;
  po.follow = opt_.inherit && filter_ && !targets_.empty();
  po.ring_bytes = targets_.empty() && !opt_.all ? 64 << 10 : opt_.ring_mb << 20;  // network only: rings stay empty
  po.wakeup_bytes = opt_.wakeup_kib ? uint64_t(opt_.wakeup_kib) << 10 : (uint64_t(opt_.ring_mb) << 20) / 4;
  po.allow_no_targets = opt_.net.enabled || opt_.all;
  po.all = opt_.all;
  po.before_attach = [&](Probes& p) {
    handlers_ = make_handler_table(p, tsc_hz);
    handlers_->set_rules(std::move(rules_));
  };
  probes_ = std::make_unique<Probes>(po);
  if (po.all) node_watch_ = std::make_unique<NodeWatch>(*probes_, [this](pid_t p) { ns_pids_.add(uint32_t(p)); });
  if (po.follow)
    follower_ = std::make_unique<ProcessFollower>(
        *probes_, pid_t(filter_), [this](pid_t p, const std::optional<PidEntry>& e) { ns_pids_.add(uint32_t(p), e); });
  if (opt_.net.enabled) {
    NetOptions no = opt_.net;
    no.pid = filter_;
    no.followed_map_fd = probes_->followed_map_fd();
    no.ring_bytes = opt_.net_ring_mb << 20;
    no.zstd_level = opt_.zstd_level;
    net_ = std::make_unique<NetCapture>(no);
  }
}

// The MinRTT peers (their responder binds now, so a busy port stops us before
// the trace exists), meta.json (complete=false until stop), events.cpt, the
// pipeline writing it, the channel table and the control socket.
void Recording::open_trace() {
  NodeInfo ni = read_node_info();
  std::string node = opt_.node.empty() ? ni.host : opt_.node;
  if (opt_.minrtt.active())
    minrtt_ = std::make_unique<MinrttRecording>(opt_.minrtt, node, clock_->sim(), clock_->tsc_hz());
  meta_ = {{"format", "cptrace"},   {"node", node},        {"machine", ni.to_json()}, {"targets", targets_},
           {"filter_pid", filter_}, {"command", opt_.cmd}, {"complete", false}};
  meta_["start"] = clock_->start_json();
  if (clock_->sim().enabled) meta_["simulated_clock"] = clock_->sim().to_json();
  skew_start_ = measure_tsc_skew_in_turn();  // the command is held: nothing of it runs yet
  meta_["tsc"] = tsc_meta(tsc_verdict_, opt_.skew_period_s, skew_start_, {}, std::nullopt);
  skew_watch_ = std::make_unique<SkewWatch>(std::chrono::milliseconds(int64_t(opt_.skew_period_s * 1000)));
  // The default DIR/control.sock always fits (reached through DIR's descriptor);
  // a chosen one is checked before DIR is created.
  if (!opt_.control_socket.empty()) ControlSocket::check_address(opt_.control_socket);
  writer_ = std::make_unique<TraceWriter>(opt_.out_dir, meta_, opt_.overwrite);
  writer_->reserve_space(kStopReserveBytes);
  pipe_ = std::make_unique<BlockPipeline>([w = writer_.get()](const EncodedFrame& f) { w->write(f); },
                                          opt_.block_events, opt_.compressors, kInitialBlocks, opt_.zstd_level,
                                          collector_max_blocks(opt_.block_events));
  if (opt_.zstd_fast_level != opt_.zstd_level) pipe_->set_fast_level(opt_.zstd_fast_level);
  pipe_->submit_frame(*clock_->take_points_frame());
  channels_.on_new = [this](const ChannelInfo& c) {
    try {
      handlers_->on_channel(c.id, c.name);
    } catch (const std::exception& e) {
      say("handler for channel {}: {}", c.name, e.what());
    }
  };
  if (opt_.pid) channels_.add_registry(opt_.pid);
  if (filter_) ns_pids_.add(filter_);
  if (node_watch_)  // processes running at the start: channels opened before us, pids in their namespaces
    for (pid_t p : node_watch_->hello().scanned()) {
      channels_.add_registry(p);
      ns_pids_.add(uint32_t(p));
    }
  control_ = std::make_unique<ControlSocket>(
      opt_.control_socket.empty() ? (fs::path(opt_.out_dir) / "control.sock").string() : opt_.control_socket,
      [this](const json& req) { return handle_control(*handlers_, req); });
}

// The drain and capture threads, the stop signals, then the command goes.
void Recording::start_drains() {
  drain_ = std::make_unique<RingDrain>(probes_->ring_fds(), *pipe_, [this](const ChannelInfo& c) { channels_.add(c); });
  drain_->set_stage(probes_->stage());
  drain_->set_on_new_pid([this](uint32_t pid) { ns_pids_.add(pid); });
  drain_->set_drop_counter([p = probes_.get()] { return p->counter_total(CP_CNT_DROPPED); });
  if (clock_->sim().enabled) drain_->set_tsc_transform(&clock_->sim());
  if (minrtt_) minrtt_->start();
  drain_->start();
  if (net_) net_->start(*pipe_);

  stop_ = std::make_unique<StopSignals>();
  if (child_) child_->release();
  for (const auto& d : degraded_features(kernel_features())) say("Linux {}: {}", kernel_features().release, d);
  if (net_)
    for (const auto& d : net_->missing()) say("--net: Linux {}: {}", kernel_features().release, d);
  if (!clock_->watching_syscalls())
    say("Linux {}: clock-adjusting syscalls not watched ({}): adjustments are seen "
        "only through the NTP state at each correlation point",
        kernel_features().release, clock_->why_not_watched());
  say("attached {} probes in {} file(s){}{}, writing {}", probes_->attached().size(),
      targets_.size() + probes_->added_targets().size(), net_ ? " + network capture" : "",
      opt_.all    ? ", every process using libcptrace, now and later"
      : !filter_  ? ", all processes"
      : follower_ ? fmt::format(", pid {} and the children it forks", filter_)
                  : fmt::format(", pid {}", filter_),
      opt_.out_dir);
  // Loading and attaching took a while (a second on a busy machine): a point
  // now, so the first kernel stamps do not share one long segment with it.
  clock_->add_extra_points({clock_->sample()});
  cpu_at_attach_ = own_cpu_s();
}

// Pending side frames: new correlation points, channel names, handler changes,
// MinRTT rounds, and the counters as they stand.
void Recording::flush_side_frames(const Counters& counts) {
  if (auto f = clock_->take_points_frame()) pipe_->submit_frame(std::move(*f));
  if (auto f = clock_->take_adjustments_frame()) pipe_->submit_frame(std::move(*f));
  EncodedFrame f;
  if (channels_.take_pending(f)) pipe_->submit_frame(std::move(f));
  if (handlers_->take_pending(f)) pipe_->submit_frame(std::move(f));
  if (ns_pids_.take_pending(f)) pipe_->submit_frame(std::move(f));
  if (minrtt_) {
    auto rounds = minrtt_->take_rounds();
    if (!rounds.empty()) {
      pipe_->submit_frame(encode_json(FrameType::Sync, sync_frame_json(rounds), uint32_t(rounds.size())));
      sync_rounds_.insert(sync_rounds_.end(), rounds.begin(), rounds.end());
    }
  }
  json cj = counters_json(counts);
  if (net_) cj["net"] = net_counters_json();
  pipe_->submit_frame(encode_json(FrameType::Counters, json_text(cj), 1));
}

// The network counters, with the Net records a failed write discarded counted
// as dropped (per CPU unknown: on CPU 0).
json Recording::net_counters_json() const {
  json j = net_->counters_json();
  uint64_t lost = pipe_->failed() ? pipe_->discarded().net_events : 0;
  if (lost && j["dropped"].is_array() && !j["dropped"].empty())
    j["dropped"][0] = j["dropped"][0].get<uint64_t>() + lost;
  return j;
}

// After a write failure: the events the pipeline could not write are dropped
// events, the lost series points lost series, so that recorded + dropped +
// filtered == seen still holds for what the file keeps.
void Recording::count_discarded() {
  const DiscardedRecords& d = pipe_->discarded();
  auto add = [](std::vector<uint64_t>& to, const std::vector<uint64_t>& v) {
    if (to.size() < v.size()) to.resize(v.size());
    for (size_t cpu = 0; cpu < v.size(); ++cpu) to[cpu] += v[cpu];
  };
  add(final_counts_.dropped, d.events_per_cpu);
  add(final_counts_.series_lost, d.series_per_cpu);
}

// The pipeline's last side frames were discarded with everything after the
// failure; written here directly, into the space the reserve gave back: the
// final counters (the reader's accounting), the last correlation point and the
// whole channel table. Best effort: a failure here is reported, not thrown.
void Recording::write_last_frames() {
  try {
    json cj = counters_json(final_counts_);
    if (net_) cj["net"] = net_counters_json();
    writer_->write(encode_json(FrameType::Counters, json_text(cj), 1));
    writer_->write(clock_->last_point_frame());
    json ch = channels_.all_json();
    if (!ch.empty()) writer_->write(encode_json(FrameType::Channels, json_text(ch), uint32_t(ch.size())));
    json pids = ns_pids_.all_json();
    if (!pids["processes"].empty())
      writer_->write(encode_json(FrameType::Processes, json_text(pids), uint32_t(pids["processes"].size())));
  } catch (const std::exception& e) {
    say("{}; the trace's last counters are not final, so `info` may not balance", e.what());
  }
}

void Recording::report_write_failure() const {
  const SinkFailure& f = pipe_->failure();
  const DiscardedRecords& d = pipe_->discarded();
  const char* name = f.error ? strerrorname_np(f.error) : nullptr;
  say("{}{}{}{}; writing stopped after {} bytes of {}/events.cpt, the trace is "
      "readable up to there; {} events not written are counted as dropped{}",
      f.what, name ? " (" : "", name ? name : "", name ? ")" : "", writer_->bytes_written(), opt_.out_dir, d.events(),
      d.net_events ? fmt::format(", {} network events too", d.net_events) : "");
  if (child_) say("the command exited with status {}", child_->exit_status());
}

// Said at once when a write fails: from here on the recording only counts. The
// probes stay attached until the recording's normal end, so every event the
// program emits is still seen and, not written, counted as dropped: recorded +
// dropped + filtered == seen == emitted holds to the end.
void Recording::announce_write_failure() const {
  const SinkFailure& f = pipe_->failure();
  const char* name = f.error ? strerrorname_np(f.error) : nullptr;
  if (opt_.progress && isatty(2)) say_raw("\n");  // off the progress line
  say("{}{}{}{}; writing stopped at {} bytes of {}/events.cpt; events are counted as dropped until the recording "
      "ends",
      f.what, name ? " (" : "", name ? name : "", name ? ")" : "", writer_->bytes_written(), opt_.out_dir);
}

void progress_line(const BlockPipeline& pipe, const Counters& c, double secs, uint64_t prev_ev, uint64_t prev_bytes,
                   double dt) {
  uint64_t ev = pipe.stats().events, by = pipe.stats().frame_bytes;
  fmt::print(stderr, "\r[{:6.1f}s] {:10.0f} events/s  {:7.2f} MB/s written  {} events  {} dropped  ", secs,
             (ev - prev_ev) / dt, (by - prev_bytes) / dt / 1e6, ev, c.total_dropped());
}

// Until a stop signal, --duration, or the end of the recorded process: the
// correlation stream every ~100 ms (denser around clock changes: the extra points
// clock_schedule.h asks for), and a flush (frames, progress) every flush_s.
void Recording::run() {
  bool tty = opt_.progress && isatty(2);
  auto t0 = std::chrono::steady_clock::now(), last_flush = t0;
  uint64_t prev_ev = 0, prev_bytes = 0;
  bool failure_announced = false;
  uint64_t next_regular = mono_ns() + kRegularPointNs;
  while (!stop_->signal()) {
    clock_->wait_for_next(next_regular, target_exit_ ? target_exit_->fd() : -1);
    if (target_gone()) break;
    uint64_t now_mono = mono_ns();
    bool regular = now_mono >= next_regular;
    clock_->point_if_due(now_mono, regular);
    if (!regular) continue;
    next_regular = now_mono + kRegularPointNs;
    auto now = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(now - t0).count();
    double since_flush = std::chrono::duration<double>(now - last_flush).count();
    if (since_flush >= opt_.flush_s) {
      drain_->request_flush();
      if (net_) net_->request_flush();
      Counters counts = probes_->read_counters();
      if (!first_drop_s_ && counts.total_dropped()) first_drop_s_ = secs;
      flush_side_frames(counts);
      if (tty) {
        progress_line(*pipe_, counts, secs, prev_ev, prev_bytes, since_flush);
        prev_ev = pipe_->stats().events;
        prev_bytes = pipe_->stats().frame_bytes;
      }
      last_flush = now;
    }
    if (opt_.duration_s > 0 && secs >= opt_.duration_s) break;
    if (opt_.pid && kill(opt_.pid, 0) != 0) break;  // gone, where no pidfd told
    if (pipe_->failed() && !failure_announced) {  // disk full or I/O error: count from now on
      announce_write_failure();
      failure_announced = true;
    }
  }
  if (tty) fmt::print(stderr, "\n");
}

// The command has exited (reaped, its status kept), or the -p process has
// ended: checked at every wake-up, which its end itself causes.
bool Recording::target_gone() {
  if (child_ && child_->poll_exited()) return command_ended_ = true;
  return opt_.pid && target_exit_ && target_exit_->ended();
}

// The command first (it gets our signal, as under a shell's Ctrl-C), then the
// probes, so nothing new arrives; then drain, then the events handlers still
// hold, then the final side frames with counters that no longer move.
// After a write failure the same sequence; the trace's last frames are then
// written directly (write_last_frames()).
void Recording::stop_and_flush() {
  // Detaching, draining and the closing rounds take seconds on a busy machine.
  CorrelationKeeper keeper([c = clock_.get()] { return c->sample(); }, std::chrono::milliseconds(50));
  stop_sources();
  uint64_t held_series = drain_the_rest();
  if (child_) child_->wait();
  skew_periodic_ = skew_watch_->finish();
  skew_stop_ = measure_tsc_skew_in_turn();  // the command is gone: its CPUs are free
  if (minrtt_) minrtt_->stop();  // MinRTT2, after the command is gone: a quiet period
  clock_->add_extra_points(keeper.finish());  // beyond the regular cadence, as the schedule's are
  clock_->take_last_point();
  write_the_end(held_series);
}

// The command is signalled, the control socket closed, the probes detached,
// the follower and node watch stopped (their figures into meta.json), and the
// network capture stopped: from here on nothing new arrives.
void Recording::stop_sources() {
  if (child_) child_->signal(stopped_by() ? stopped_by() : SIGTERM);
  control_.reset();  // no handler change after this point
  probes_->detach();
  // Thread buffers the exit path could not hand over: their events are lost
  // and, unreadable, could not be counted (docs/record.md).
  meta_["thread_exit"] = {{"unreadable_buffers", probes_->counter_total(CP_CNT_EXIT_UNREADABLE)},
                          {"untracked_buffers", probes_->counter_total(CP_CNT_EXIT_UNTRACKED)}};
  if (follower_) {
    meta_["follow"] = {{"processes", follower_->forks_followed()},
                       {"gone_before_attach", follower_->forks_missed()},
                       {"not_reported", probes_->counter_total(CP_CNT_FOLLOW_LOST)},
                       {"hello_answered", follower_->hello().answered()},
                       {"hello_unanswered", follower_->hello().unanswered()},
                       {"hello_wait", follower_->hello().wait_json()}};
    follower_.reset();  // its files go: no new child waits for us
  }
  if (node_watch_) {
    const HelloResponder& h = node_watch_->hello();
    meta_["hello"] = {{"answered", h.answered()},
                      {"unanswered", h.unanswered()},
                      {"not_reported", probes_->counter_total(CP_CNT_FOLLOW_LOST)},
                      {"files_checked", h.files_checked()}};
    meta_["hello"]["wait"] = h.wait_json();
    node_watch_.reset();
  }
  meta_["targets_added"] = probes_->added_targets();
  if (net_) net_->stop();
}

// The final counters, the rings drained to the end, then the events handlers
// still hold in BPF maps; the channel registries of every pid seen. Returns
// the series points among the held events (finish_meta counts them).
uint64_t Recording::drain_the_rest() {
  final_counts_ = probes_->read_counters();
  drain_->stop_and_flush();
  HeldEvents held = collect_held_events(probes_->last_slots_fd(), probes_->count_slots_fd());
  for (TraceEvent& e : held.events)  // held in BPF in raw TSC: the simulated clock applies too
    if (clock_->sim().enabled && is_tsc(e.timebase)) e.ts = clock_->sim().apply(e.ts);
  submit_events(*pipe_, held.events);
  for (size_t cpu = 0; cpu < held.filtered_fix.size() && cpu < final_counts_.filtered.size(); ++cpu)
    final_counts_.filtered[cpu] -= held.filtered_fix[cpu];  // firstlast "last": recorded after all
  for (uint32_t pid : drain_->pids()) channels_.add_registry(pid);
  return std::count_if(held.events.begin(), held.events.end(),
                       [](const TraceEvent& e) { return e.kind == uint8_t(EventKind::Count); });
}

// The last side frames, the pipeline finished, and meta.json; after a write
// failure the last frames go directly into the reserve.
void Recording::write_the_end(uint64_t held_series) {
  writer_->release_reserve();  // room for the last frames and meta.json, whatever happened
  flush_side_frames(final_counts_);
  pipe_->finish();
  if (pipe_->failed()) {
    count_discarded();
    write_last_frames();
    report_write_failure();
  }
  finish_meta(held_series);
  try {
    writer_->finish(meta_);
  } catch (const std::exception& e) {
    if (!pipe_->failed()) throw;
    // events.cpt holds the final counters: the reader needs no meta.json.
    say("{}; meta.json stays as written at start", e.what());
  }
}

const char* Recording::stop_reason() const {
  if (pipe_->failed()) return "write error";
  if (stopped_by()) return strsignal(stopped_by());
  if (command_ended_) return "command exited";
  if (opt_.pid && kill(opt_.pid, 0) != 0) return "process exited";
  return "duration";
}

void Recording::finish_meta(uint64_t held_series_points) {
  double tsc_hz = clock_->tsc_hz();
  meta_["stop"] = clock_->stop_json();
  meta_["stop"]["reason"] = stop_reason();
  meta_["tsc_hz"] = tsc_hz;
  meta_["tsc"] = tsc_meta(tsc_verdict_, opt_.skew_period_s, skew_start_, skew_periodic_, skew_stop_);
  meta_["clock_discipline"] = clock_->discipline_json();
  meta_["channels"] = channels_.all_json();
  meta_["channel_names_refused"] = channels_.refused_json();
  for (auto& [pid, n] : meta_["channel_names_refused"].items())
    say("pid {}: its channel registry refused {} name(s) (it keeps {}): channels opened before this recorder "
        "attached may show as ids",
        pid, n.get<uint64_t>(), CP_REGISTRY_MAX_NAMES);
  meta_["pid_namespaces"] = ns_pids_.all_json();
  meta_["counters"] = counters_json(final_counts_);
  meta_["handlers"] = handlers_->history();  // the last changes; the trace's frames hold all
  if (uint64_t omitted = handlers_->history_omitted()) meta_["handlers_omitted"] = omitted;
  // Series points written: those the drain and the held maps produced, less any
  // a write failure discarded (pipe_->stats() counts written records only).
  uint64_t series_points = drain_->series_points() + held_series_points;
  if (pipe_->failed()) series_points -= std::min(series_points, pipe_->discarded().series_points);
  recorded_ = pipe_->stats().events.load() - series_points;
  meta_["recorded_events"] = recorded_;
  meta_["counter_series_points"] = series_points;
  meta_["collector"] =
      collector_json(drain_->stats(), *pipe_, first_drop_s_, net_ ? uint64_t(opt_.net_ring_mb) << 20 : 0);
  auto [user, sys] = own_cpu_s();
  cpu_attached_ = {user - cpu_at_attach_.first, sys - cpu_at_attach_.second};
  meta_["collector"]["cpu_s_attached"] = {{"user", cpu_attached_.first}, {"system", cpu_attached_.second}};
  if (minrtt_) meta_["minrtt"] = minrtt_->meta(tsc_hz, sync_rounds_);
  if (net_) {
    meta_["net"] = net_->describe();
    meta_["counters"]["net"] = net_counters_json();
    uint64_t lost = pipe_->failed() ? pipe_->discarded().net_events : 0;
    meta_["recorded_net_events"] = net_->recorded() - std::min(net_->recorded(), lost);
  }
  if (pipe_->failed())
    meta_["write_error"] = {{"what", pipe_->failure().what},
                            {"bytes_written", writer_->bytes_written()},
                            {"events_not_written", pipe_->discarded().events()},
                            {"net_events_not_written", pipe_->discarded().net_events}};
  meta_["complete"] = true;
}

void Recording::write_summary() {
  const Counters& c = final_counts_;
  say("{} events recorded, {} dropped, {} filtered, {} seen -> {}", recorded_, c.total_dropped(), c.total_filtered(),
      c.total_seen(), opt_.out_dir);
  if (recorded_ > 0) {
    const double cpu_s = cpu_attached_.first + cpu_attached_.second;
    say("recorder CPU {:.1f} ns per event ({:.3f} s user + {:.3f} s system while attached, "
        "every thread of the recorder)",
        cpu_s * 1e9 / double(recorded_), cpu_attached_.first, cpu_attached_.second);
  }
  if (net_) {
    Counters nc = net_->read_counters();
    uint64_t lost = pipe_->failed() ? pipe_->discarded().net_events : 0;
    say("{} network events recorded, {} dropped, {} seen", net_->recorded() - std::min(net_->recorded(), lost),
        nc.total_dropped() + lost, nc.total_seen());
  }
  // A command that ran to its end without ever reaching a probe site (no
  // cp_logTS, JNI or batch call in it or its children, e.g. /bin/true) would
  // otherwise leave an empty trace with no word why. Once, after the summary.
  if (child_ && command_ended_ && !targets_.empty() && c.total_seen() == 0)
    say("no probe site fired in {} or its children (no cp_logTS, JNI or batch call): "
        "nothing was recorded from them",
        opt_.cmd.front());
}

// The command's status, as a shell would give it; 1 when the trace could not be
// written completely (the command's own status is on stderr then).
int Recording::exit_status() const {
  if (pipe_->failed()) return 1;
  return child_ ? child_->exit_status() : 0;
}

}  // namespace

uint32_t default_ring_mb() { return ring_mb_for_this_machine(); }

int run_record(const RecordOptions& given) {
  check_record_options(given);
  RecordOptions opt = given;
  if (!opt.net_ring_mb) opt.net_ring_mb = opt.ring_mb ? opt.ring_mb : kNetRingMb;
  if (!opt.ring_mb) {  // sized by memory; its wakeup stays the one measured best for 16 MiB
    opt.ring_mb = default_ring_mb();
    if (!opt.wakeup_kib) opt.wakeup_kib = std::min<uint32_t>(opt.ring_mb << 8, 4096);
  }
  Recording rec(opt, plan_recording(opt));
  rec.load_and_attach();
  rec.open_trace();
  rec.start_drains();
  rec.run();
  rec.stop_and_flush();
  rec.write_summary();
  return rec.exit_status();
}

}  // namespace cptrace
