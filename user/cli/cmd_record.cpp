// `cptrace record`: its options; the recording itself is record/recorder.cpp.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "record/recorder.h"
#include "sync/minrtt_record.h"

namespace cptrace {

namespace {

// --ring-mb: a power of two. CLI11 runs every validator of an `&` chain, so this
// one also sees values Range rejected ("abc", 99999999999999999999): it parses
// without throwing and leaves those to Range's message, which names the value.
std::string power_of_two_problem(const std::string& s) {
  unsigned long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return "";
  return v != 0 && (v & (v - 1)) == 0 ? std::string() : s + " is not a power of two";
}

// --duration: seconds, finite and >= 0. CLI11's NonNegativeNumber lets nan
// through (every comparison with it is false), and its range message for inf
// spells out DBL_MAX.
std::string duration_problem(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return s + " is not a number of seconds";
  if (!std::isfinite(v) || v < 0) return s + " is not a finite number of seconds >= 0";
  return "";
}

// The --net filters (net/net_capture.h).
void add_net_options(CLI::App* record, NetOptions& net) {
  auto* on = record->add_flag("--net", net.enabled,
                              "also record network events (socket send/recv, packet tx/rx); alone: network only");
  record->add_option("--netns", net.netns,
                     "--net: only this network namespace (PATH such as /run/netns/NAME, or self)");
  record->add_option("--cgroup", net.cgroup, "--net: only sockets/packets owned by tasks of this cgroup v2 directory");
  record->add_option("--port", net.ports, "--net: only traffic with this port at either end; repeatable")
      ->check(CLI::Range(1, 65535));
  record
      ->add_flag("--net-send-calls", net.send_calls,
                 "--net: also stamp where each send call (write, send*) began and identify each UDP message by "
                 "its first bytes, for `netlat --writes`; every system call of the machine costs more meanwhile "
                 "(docs/net.md)")
      ->needs(on);
}

// What to record and where: the targets, the duration, the output.
void add_target_options(CLI::App* record, RecordOptions& o) {
  record->add_option("-o,--output", o.out_dir, "trace directory to create")->required();
  record
      ->add_option(
          "--lib", o.libs,
          "ELF file holding the probe stubs (libcptrace.so, libcptrace_jni.so or a static executable); repeatable")
      ->allow_extra_args(false);  // one path per --lib, so `--lib X -- CMD` still ends at --
  record->add_option("--duration", o.duration_s, "stop after SEC seconds")
      ->check(CLI::Validator(duration_problem, "SEC"));
  record
      ->add_option("-p,--pid", o.pid, "record this running process (late attach) and the children it forks from now on")
      ->check(CLI::PositiveNumber);
  record->add_flag("--all", o.all,
                   "record every process of the node using libcptrace (any copy, any container), those running "
                   "and those started later");
  record->add_flag("!--no-inherit", o.inherit, "-p / -- CMD: record that one process only, not the children it forks");
  record->add_option("--node", o.node, "node name written into the trace (default: host name)");
  record->add_flag("-f,--force", o.overwrite, "overwrite an existing trace in the directory");
  record->add_flag("!--no-progress", o.progress, "no progress line on the terminal");
}

// The collector: rings, compression, frames. Returns --zstd-level, whose
// presence decides the fast level.
CLI::Option* add_collector_options(CLI::App* record, RecordOptions& o) {
  record->add_option("--compressors", o.compressors, "compression threads")->check(CLI::Range(1, 64));
  record
      ->add_option("--ring-mb", o.ring_mb,
                   "ring buffer size per CPU, MiB (power of two; default 16 to 64 by the machine's memory)")
      ->check(CLI::Range(1, 1024) & CLI::Validator([](std::string& s) { return power_of_two_problem(s); }, "POW2"));
  // Defaults sized by bench/size_sweep.py (docs/record.md has the figures).
  record
      ->add_option("--wakeup-kib", o.wakeup_kib,
                   "wake the collector once this many KiB wait in a CPU's ring (default: a quarter of the ring)")
      ->check(CLI::Range(4, 1 << 20));
  record->add_option("--block-events", o.block_events, "events per compressed trace frame")
      ->check(CLI::Range(1024, 65536));  // 64 blocks in flight: at most 64 x 64 Ki events buffered
  return record
      ->add_option("--zstd-level", o.zstd_level,
                   "zstd level of event frames (default: 1, or -5 while compressing keeps a CPU busy)")
      ->check(CLI::Range(-5, 19));
}

}  // namespace

SubcommandRunner add_record_command(CLI::App& app) {
  auto rec = std::make_shared<RecordOptions>();
  auto* record = app.add_subcommand("record", "record cp_logTS events into a trace directory (root)");
  add_target_options(record, *rec);
  CLI::Option* level = add_collector_options(record, *rec);
  record->add_option("--config", rec->config_file,
                     "channel handler rules: lines `PATTERN HANDLER [PARAMS]` (docs/record.md)");
  record->add_option("--control-socket", rec->control_socket,
                     "control socket for `cptrace config` (default: DIR/control.sock)");
  record
      ->add_option("--skew-period", rec->skew_period_s,
                   "seconds between measures of the TSC skew across CPUs while recording (0: start and stop only)")
      ->check(CLI::Range(0.0, 3600.0));
  // Kept so that scripts written for it still run: a TSC the kernel distrusts
  // is now recorded and checked by default.
  record->add_flag_callback(
      "--accept-unstable-tsc",
      [] {
        fmt::print(stderr,
                   "cptrace record: --accept-unstable-tsc is no longer needed: a TSC the kernel distrusts is "
                   "recorded and checked by default (docs/clock.md)\n");
      },
      "no effect (a TSC the kernel distrusts is recorded and checked by default)");
  add_minrtt_record_options(record, rec->minrtt);
  add_net_options(record, rec->net);
  record->add_option("cmd", rec->cmd, "command to run and record (after --)");
  return {record, [rec, level] {
            if (level->count()) rec->zstd_fast_level = rec->zstd_level;  // a level asked for is kept
            return run_record(*rec);
          }};
}

}  // namespace cptrace
