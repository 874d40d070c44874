#include "recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "attach_targets.h"
#include "block_pipeline.h"
#include "clock_map.h"
#include "minrtt_record.h"
#include "node_info.h"
#include "probe_attach.h"
#include "proc_registry.h"
#include "ring_drain.h"
#include "trace_writer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace cptrace {

namespace {

std::atomic<int> g_stop_signal{0};
void on_stop_signal(int sig) { g_stop_signal.store(sig); }

uint64_t now_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// The channel table: names from the BPF announce probe and from process
// registries. New entries are written as Channels frames as they appear.
class ChannelTable {
 public:
  void add(const ChannelInfo& c) {
    std::lock_guard lk(mu_);
    auto [it, fresh] = all_.try_emplace(c.id, c);
    if (fresh || (it->second.name.empty() && !c.name.empty())) {
      it->second = c;
      pending_.push_back(c);
    }
  }
  static json to_json(const std::vector<ChannelInfo>& v) {
    json a = json::array();
    for (const auto& c : v) a.push_back({{"id", c.id}, {"name", c.name}, {"pid", c.pid}});
    return a;
  }
  // Entries not yet written, as a frame (or nothing).
  bool take_pending(EncodedFrame& f) {
    std::lock_guard lk(mu_);
    if (pending_.empty()) return false;
    f = encode_json(FrameType::Channels, to_json(pending_).dump(), pending_.size());
    pending_.clear();
    return true;
  }
  json all_json() {
    std::lock_guard lk(mu_);
    std::vector<ChannelInfo> v;
    for (auto& [id, c] : all_) v.push_back(c);
    return to_json(v);
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, ChannelInfo> all_;
  std::vector<ChannelInfo> pending_;
};

void add_registry(ChannelTable& table, pid_t pid) {
  try {
    for (const auto& e : read_process_registry(pid))
      table.add(ChannelInfo{e.id, e.name, uint32_t(pid)});
  } catch (const std::exception&) {
    // The process may have exited or not use libcptrace's registry: names then
    // come only from the announce probe.
  }
}

json counters_json(const Counters& c) { return {{"seen", c.seen}, {"dropped", c.dropped}}; }

// A child that waits on a pipe until the probes are attached, then execs CMD.
pid_t spawn_held(const std::vector<std::string>& cmd, int& release_fd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC)) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1) _exit(127);  // recorder gave up
    std::vector<char*> argv;
    for (auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    fprintf(stderr, "cptrace record: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(p[0]);
  release_fd = p[1];
  return pid;
}

std::vector<std::string> choose_targets(const RecordOptions& opt) {
  std::vector<std::string> t = opt.libs;
  if (t.empty() && opt.pid) t = targets_of_process(opt.pid);
  if (t.empty() && !opt.cmd.empty()) t = targets_of_command(opt.cmd[0]);
  if (t.empty()) {
    if (opt.pid)
      throw std::runtime_error(fmt::format(
          "-p {}: no mapped file of the process defines cp_logTS (does it use libcptrace?); "
          "name the library with --lib", opt.pid));
    if (!opt.cmd.empty())
      throw std::runtime_error(fmt::format(
          "{}: neither the executable nor its shared libraries define cp_logTS; name the "
          "library with --lib (needed when it is loaded with dlopen, e.g. by a JVM)",
          opt.cmd[0]));
    throw std::runtime_error("nothing to attach to: give --lib PATH, -p PID or -- CMD");
  }
  for (auto& p : t) p = fs::weakly_canonical(p).string();
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

void progress_line(const BlockPipeline& pipe, const Counters& c, double secs, uint64_t prev_ev,
                   uint64_t prev_bytes, double dt) {
  uint64_t ev = pipe.stats().events, by = pipe.stats().frame_bytes;
  fprintf(stderr, "\r[%6.1fs] %10.0f events/s  %7.2f MB/s written  %llu events  %llu dropped  ",
          secs, (ev - prev_ev) / dt, (by - prev_bytes) / dt / 1e6, (unsigned long long)ev,
          (unsigned long long)c.total_dropped());
}

}  // namespace

int run_record(const RecordOptions& opt) {
  if (opt.pid && !opt.cmd.empty()) throw std::runtime_error("-p and -- CMD exclude each other");
  if (opt.pid && kill(opt.pid, 0) != 0)
    throw std::runtime_error(fmt::format("-p {}: no such process ({})", opt.pid, strerror(errno)));
  if (opt.duration_s < 0) throw std::runtime_error("--duration must be >= 0");
  auto targets = choose_targets(opt);

  int release_fd = -1;
  pid_t child = opt.cmd.empty() ? 0 : spawn_held(opt.cmd, release_fd);
  uint32_t filter = opt.pid ? uint32_t(opt.pid) : uint32_t(child);

  ProbeOptions po;
  po.targets = targets;
  po.filter_tgid = filter;
  po.ring_bytes = opt.ring_mb << 20;
  po.wakeup_bytes = po.ring_bytes / 4;
  Probes probes(po);

  NodeInfo ni = read_node_info();
  // Two correlation points before any event frame can be written, so even a
  // recorder killed in its first flush period leaves convertible timestamps.
  std::vector<ClockPoint> clock{sample_clock_point()};
  usleep(20000);
  clock.push_back(sample_clock_point());
  // Test-only simulated clock: applied to every TSC value this node writes.
  ClockTransform sim = make_simulated_clock(opt.minrtt.simulate_clock, ClockMap(clock).tsc_hz());
  for (auto& p : clock) p.tsc = sim.apply(p.tsc);
  auto sample_clock = [&] {
    ClockPoint p = sample_clock_point();
    p.tsc = sim.apply(p.tsc);
    return p;
  };
  std::string node = opt.node.empty() ? ni.host : opt.node;
  std::unique_ptr<MinrttRecording> minrtt;
  if (opt.minrtt.active()) minrtt = std::make_unique<MinrttRecording>(opt.minrtt, node, sim, ClockMap(clock).tsc_hz());
  std::vector<SyncRound> sync_rounds;
  json meta = {{"format", "cptrace"},
               {"version", kFormatVersion},
               {"node", node},
               {"machine", ni.to_json()},
               {"start", {{"realtime_ns", now_ns(CLOCK_REALTIME)},
                          {"mono_ns", clock[0].mono_ns},
                          {"tsc", clock[0].tsc}}},
               {"targets", targets},
               {"filter_pid", filter},
               {"command", opt.cmd},
               {"complete", false}};
  if (sim.enabled) meta["simulated_clock"] = sim.to_json();
  TraceWriter writer(opt.out_dir, meta, opt.overwrite);
  BlockPipeline pipe([&](const EncodedFrame& f) { writer.write(f); }, 16384, opt.compressors, 64,
                     opt.zstd_level);
  pipe.submit_frame(encode_clock(clock));
  size_t clock_written = clock.size();
  ChannelTable channels;
  if (opt.pid) add_registry(channels, opt.pid);
  RingDrain drain(probes.ring_fds(), pipe, [&](const ChannelInfo& c) { channels.add(c); });
  if (sim.enabled) drain.set_tsc_transform(&sim);
  if (minrtt) minrtt->start();
  drain.start();

  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (child) {
    if (write(release_fd, "g", 1) != 1) throw std::runtime_error("cannot release the command");
    close(release_fd);
  }

  fprintf(stderr, "cptrace record: attached %zu probes in %zu file(s)%s, writing %s\n",
          probes.attached().size(), targets.size(),
          filter ? fmt::format(", pid {}", filter).c_str() : ", all processes", opt.out_dir.c_str());
  bool tty = opt.progress && isatty(2);
  auto t0 = std::chrono::steady_clock::now(), last_flush = t0;
  uint64_t prev_ev = 0, prev_bytes = 0;
  int child_status = 0;
  bool child_done = false;
  auto flush_side_frames = [&] {
    if (clock.size() > clock_written) {
      pipe.submit_frame(encode_clock({clock.begin() + clock_written, clock.end()}));
      clock_written = clock.size();
    }
    EncodedFrame f;
    if (channels.take_pending(f)) pipe.submit_frame(std::move(f));
    if (minrtt) {
      auto rounds = minrtt->take_rounds();
      if (!rounds.empty()) {
        pipe.submit_frame(encode_json(FrameType::Sync, sync_frame_json(rounds), uint32_t(rounds.size())));
        sync_rounds.insert(sync_rounds.end(), rounds.begin(), rounds.end());
      }
    }
    pipe.submit_frame(encode_json(FrameType::Counters,
                                  counters_json(probes.read_counters()).dump(), 1));
  };

  while (!g_stop_signal.load()) {
    usleep(100000);  // correlation stream period: ~100 ms
    clock.push_back(sample_clock());
    auto now = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(now - t0).count();
    double since_flush = std::chrono::duration<double>(now - last_flush).count();
    if (since_flush >= opt.flush_s) {
      drain.request_flush();
      flush_side_frames();
      if (tty) {
        progress_line(pipe, probes.read_counters(), secs, prev_ev, prev_bytes, since_flush);
        prev_ev = pipe.stats().events;
        prev_bytes = pipe.stats().frame_bytes;
      }
      last_flush = now;
    }
    if (opt.duration_s > 0 && secs >= opt.duration_s) break;
    if (child && waitpid(child, &child_status, WNOHANG) == child) {
      child_done = true;
      break;
    }
    if (opt.pid && kill(opt.pid, 0) != 0) break;  // the recorded process is gone
  }
  if (tty) fprintf(stderr, "\n");

  // Stop: the command first (it gets our signal, as under a shell's Ctrl-C),
  // then the probes, so nothing new arrives; then drain, then flush.
  if (child && !child_done) kill(child, g_stop_signal ? g_stop_signal.load() : SIGTERM);
  probes.detach();
  Counters final_counts = probes.read_counters();
  drain.stop_and_flush();
  for (uint32_t pid : drain.pids()) add_registry(channels, pid);
  if (child && !child_done) waitpid(child, &child_status, 0);
  if (minrtt) minrtt->stop();  // MinRTT2, after the command is gone: a quiet period
  clock.push_back(sample_clock());
  flush_side_frames();  // after detach: these counters are final
  pipe.finish();

  ClockMap cmap(clock);
  meta["stop"] = {{"realtime_ns", now_ns(CLOCK_REALTIME)},
                  {"mono_ns", clock.back().mono_ns},
                  {"tsc", clock.back().tsc},
                  {"reason", g_stop_signal ? strsignal(g_stop_signal) :
                             child_done ? "command exited" :
                             (opt.pid && kill(opt.pid, 0) != 0) ? "process exited" : "duration"}};
  meta["tsc_hz"] = cmap.tsc_hz();
  meta["channels"] = channels.all_json();
  meta["counters"] = counters_json(final_counts);
  meta["recorded_events"] = pipe.stats().events.load();
  if (minrtt) meta["minrtt"] = minrtt->meta(cmap.tsc_hz(), sync_rounds);
  meta["complete"] = true;
  writer.finish(meta);

  uint64_t seen = final_counts.total_seen(), dropped = final_counts.total_dropped();
  fprintf(stderr, "cptrace record: %llu events recorded, %llu dropped, %llu seen -> %s\n",
          (unsigned long long)pipe.stats().events.load(), (unsigned long long)dropped,
          (unsigned long long)seen, opt.out_dir.c_str());
  // Like a shell: the command's exit code, or 128 + the signal that ended it.
  if (child && WIFEXITED(child_status)) return WEXITSTATUS(child_status);
  if (child && WIFSIGNALED(child_status)) return 128 + WTERMSIG(child_status);
  return 0;
}

}  // namespace cptrace
