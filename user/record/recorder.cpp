#include "record/recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "probe/attach_targets.h"
#include "probe/block_pipeline.h"
#include "trace/clock_map.h"
#include "record/control_socket.h"
#include "probe/handlers.h"
#include "sync/minrtt_record.h"
#include "net/net_capture.h"
#include "trace/node_info.h"
#include "probe/probe_attach.h"
#include "probe/proc_registry.h"
#include "probe/ring_drain.h"
#include "trace/trace_writer.h"

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
  std::function<void(const ChannelInfo&)> on_new;  // a channel (or its name) became known
  void add(const ChannelInfo& c) {
    {
      std::lock_guard lk(mu_);
      auto [it, fresh] = all_.try_emplace(c.id, c);
      if (!fresh && !(it->second.name.empty() && !c.name.empty())) return;
      it->second = c;
      pending_.push_back(c);
    }
    if (on_new) on_new(c);
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

json counters_json(const Counters& c) {
  return {{"seen", c.seen}, {"dropped", c.dropped}, {"filtered", c.filtered}, {"series_lost", c.series_lost}};
}

// Events the handlers still held in BPF maps at stop (user/handlers.h).
void submit_events(BlockPipeline& pipe, const std::vector<TraceEvent>& ev) {
  for (size_t i = 0; i < ev.size();) {
    Block* b = pipe.acquire();
    size_t k = std::min(ev.size() - i, pipe.block_events());
    b->events.assign(ev.begin() + i, ev.begin() + i + k);
    pipe.submit(b);
    i += k;
  }
}

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
  if (t.empty() && opt.net.enabled) return t;  // network only
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
  std::vector<ConfigRule> rules;  // a bad config file stops us before anything runs
  if (!opt.config_file.empty()) rules = parse_config_file(opt.config_file);
  if (!opt.net.enabled && (!opt.net.netns.empty() || !opt.net.cgroup.empty() || !opt.net.ports.empty()))
    throw std::runtime_error("--netns, --cgroup and --port filter network capture: add --net");
  auto targets = choose_targets(opt);

  int release_fd = -1;
  pid_t child = opt.cmd.empty() ? 0 : spawn_held(opt.cmd, release_fd);
  uint32_t filter = opt.pid ? uint32_t(opt.pid) : uint32_t(child);

  ProbeOptions po;
  po.targets = targets;
  po.filter_tgid = filter;
  po.ring_bytes = opt.ring_mb << 20;
  po.wakeup_bytes = po.ring_bytes / 4;
  po.allow_no_targets = opt.net.enabled;
  if (targets.empty()) po.ring_bytes = 64 << 10;  // network only: user rings stay empty
  // Two correlation points before any event frame can be written, so even a
  // recorder killed in its first flush period leaves convertible timestamps;
  // taken before attaching, as `counter` handlers need the TSC rate.
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
  std::unique_ptr<HandlerTable> handlers;
  po.before_attach = [&](Probes& p) {
    handlers = make_handler_table(p, ClockMap(clock).tsc_hz());
    handlers->set_rules(std::move(rules));
  };
  Probes probes(po);
  std::unique_ptr<NetCapture> net;
  if (opt.net.enabled) {
    NetOptions no = opt.net;
    no.pid = filter;
    no.ring_bytes = opt.ring_mb << 20;
    no.zstd_level = opt.zstd_level;
    net = std::make_unique<NetCapture>(no);
  }

  NodeInfo ni = read_node_info();
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
  channels.on_new = [&](const ChannelInfo& c) {
    try {
      handlers->on_channel(c.id, c.name);
    } catch (const std::exception& e) {
      fprintf(stderr, "cptrace record: handler for channel %s: %s\n", c.name.c_str(), e.what());
    }
  };
  if (opt.pid) add_registry(channels, opt.pid);
  auto control = std::make_unique<ControlSocket>(
      opt.control_socket.empty() ? (fs::path(opt.out_dir) / "control.sock").string() : opt.control_socket,
      [&](const json& req) { return handle_control(*handlers, req); });
  RingDrain drain(probes.ring_fds(), pipe, [&](const ChannelInfo& c) { channels.add(c); });
  if (sim.enabled) drain.set_tsc_transform(&sim);
  if (minrtt) minrtt->start();
  drain.start();
  if (net) net->start(pipe);

  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (child) {
    if (write(release_fd, "g", 1) != 1) throw std::runtime_error("cannot release the command");
    close(release_fd);
  }

  fprintf(stderr, "cptrace record: attached %zu probes in %zu file(s)%s%s, writing %s\n",
          probes.attached().size(), targets.size(), net ? " + network capture" : "",
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
    if (handlers->take_pending(f)) pipe.submit_frame(std::move(f));
    if (minrtt) {
      auto rounds = minrtt->take_rounds();
      if (!rounds.empty()) {
        pipe.submit_frame(encode_json(FrameType::Sync, sync_frame_json(rounds), uint32_t(rounds.size())));
        sync_rounds.insert(sync_rounds.end(), rounds.begin(), rounds.end());
      }
    }
    json cj = counters_json(probes.read_counters());
    if (net) cj["net"] = net->counters_json();
    pipe.submit_frame(encode_json(FrameType::Counters, cj.dump(), 1));
  };

  while (!g_stop_signal.load()) {
    usleep(100000);  // correlation stream period: ~100 ms
    clock.push_back(sample_clock());
    auto now = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(now - t0).count();
    double since_flush = std::chrono::duration<double>(now - last_flush).count();
    if (since_flush >= opt.flush_s) {
      drain.request_flush();
      if (net) net->request_flush();
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
  control.reset();  // no handler change after this point
  probes.detach();
  if (net) net->stop();
  Counters final_counts = probes.read_counters();
  drain.stop_and_flush();
  HeldEvents held = collect_held_events(probes.last_slots_fd(), probes.count_slots_fd(), *handlers);
  for (TraceEvent& e : held.events)  // held in BPF in raw TSC: the simulated clock applies too
    if (sim.enabled && e.timebase == uint8_t(Timebase::Tsc)) e.ts = sim.apply(e.ts);
  submit_events(pipe, held.events);
  for (size_t cpu = 0; cpu < held.filtered_fix.size() && cpu < final_counts.filtered.size(); ++cpu)
    final_counts.filtered[cpu] -= held.filtered_fix[cpu];  // firstlast "last": recorded after all
  for (uint32_t pid : drain.pids()) add_registry(channels, pid);
  if (child && !child_done) waitpid(child, &child_status, 0);
  if (minrtt) minrtt->stop();  // MinRTT2, after the command is gone: a quiet period
  clock.push_back(sample_clock());
  // After detach: these counters are final.
  if (clock.size() > clock_written) pipe.submit_frame(encode_clock({clock.begin() + clock_written, clock.end()}));
  EncodedFrame side;
  if (channels.take_pending(side)) pipe.submit_frame(std::move(side));
  if (handlers->take_pending(side)) pipe.submit_frame(std::move(side));
  if (minrtt) {
    auto rounds = minrtt->take_rounds();
    if (!rounds.empty()) {
      pipe.submit_frame(encode_json(FrameType::Sync, sync_frame_json(rounds), uint32_t(rounds.size())));
      sync_rounds.insert(sync_rounds.end(), rounds.begin(), rounds.end());
    }
  }
  json final_cj = counters_json(final_counts);
  if (net) final_cj["net"] = net->counters_json();
  pipe.submit_frame(encode_json(FrameType::Counters, final_cj.dump(), 1));
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
  meta["handlers"] = handlers->history();
  uint64_t series_points = drain.series_points() + std::count_if(held.events.begin(), held.events.end(),
      [](const TraceEvent& e) { return e.kind == uint8_t(EventKind::Count); });
  uint64_t recorded = pipe.stats().events.load() - series_points;
  meta["recorded_events"] = recorded;
  meta["counter_series_points"] = series_points;
  if (minrtt) meta["minrtt"] = minrtt->meta(cmap.tsc_hz(), sync_rounds);
  if (net) {
    meta["net"] = net->describe();
    meta["counters"]["net"] = net->counters_json();
    meta["recorded_net_events"] = net->recorded();
  }
  meta["complete"] = true;
  writer.finish(meta);

  uint64_t seen = final_counts.total_seen(), dropped = final_counts.total_dropped();
  fprintf(stderr, "cptrace record: %llu events recorded, %llu dropped, %llu filtered, %llu seen -> %s\n",
          (unsigned long long)recorded, (unsigned long long)dropped,
          (unsigned long long)final_counts.total_filtered(), (unsigned long long)seen, opt.out_dir.c_str());
  if (net) {
    Counters nc = net->read_counters();
    fprintf(stderr, "cptrace record: %llu network events recorded, %llu dropped, %llu seen\n",
            (unsigned long long)net->recorded(), (unsigned long long)nc.total_dropped(),
            (unsigned long long)nc.total_seen());
  }
  // Like a shell: the command's exit code, or 128 + the signal that ended it.
  if (child && WIFEXITED(child_status)) return WEXITSTATUS(child_status);
  if (child && WIFSIGNALED(child_status)) return 128 + WTERMSIG(child_status);
  return 0;
}

}  // namespace cptrace
