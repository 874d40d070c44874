// cptrace: the command line. Each subcommand lives in its own file; this only
// parses arguments (CLI11) and turns exceptions into one clear line + exit 1.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/cmd_load.h"
#include "cli/analysis_commands.h"
#include "cli/commands.h"
#include "translate/latency.h"
#include "cli/minrtt_cli.h"
#include "analyze/net_throughput.h"
#include "record/recorder.h"
#include "translate/translate.h"

int main(int argc, char** argv) {
  CLI::App app{"cptrace: cross-machine durations with strict error bounds"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cptrace 0.1 (trace format 1)");

  cptrace::RecordOptions rec;
  auto* record = app.add_subcommand("record", "record cp_logTS events into a trace directory (root)");
  record->add_option("-o,--output", rec.out_dir, "trace directory to create")->required();
  record->add_option("--lib", rec.libs, "ELF file holding the probe stubs (libcptrace.so, libcptrace_jni.so or a static executable); repeatable")
      ->allow_extra_args(false);  // one path per --lib, so `--lib X -- CMD` still ends at --
  record->add_option("--duration", rec.duration_s, "stop after SEC seconds")->check(CLI::NonNegativeNumber);
  record->add_option("-p,--pid", rec.pid, "record only this running process (late attach)")->check(CLI::PositiveNumber);
  record->add_option("--node", rec.node, "node name written into the trace (default: host name)");
  record->add_flag("-f,--force", rec.overwrite, "overwrite an existing trace in the directory");
  record->add_flag("!--no-progress", rec.progress, "no progress line on the terminal");
  record->add_option("--compressors", rec.compressors, "compression threads")->check(CLI::Range(1, 64));
  record->add_option("--ring-mb", rec.ring_mb, "ring buffer size per CPU, MiB (power of two)")
      ->check(CLI::Range(1, 1024) & CLI::Validator([](std::string& s) {
        unsigned v = std::stoul(s);
        return (v & (v - 1)) == 0 ? std::string() : "must be a power of two";
      }, "POW2"));
  record->add_option("--zstd-level", rec.zstd_level, "zstd level of event frames")->check(CLI::Range(-5, 19));
  record->add_option("--config", rec.config_file, "channel handler rules: lines `PATTERN HANDLER [PARAMS]` (README)");
  record->add_option("--control-socket", rec.control_socket, "control socket for `cptrace config` (default: DIR/control.sock)");
  cptrace::add_minrtt_record_options(record, rec.minrtt);
  record->add_flag("--net", rec.net.enabled, "also record network events (socket send/recv, packet tx/rx); alone: network only");
  record->add_option("--netns", rec.net.netns, "--net: only this network namespace (PATH such as /run/netns/NAME, or self)");
  record->add_option("--cgroup", rec.net.cgroup, "--net: only sockets/packets owned by tasks of this cgroup v2 directory");
  record->add_option("--port", rec.net.ports, "--net: only traffic with this port at either end; repeatable")->check(CLI::Range(1, 65535));
  record->add_option("cmd", rec.cmd, "command to run and record (after --)");

  std::string dir;
  bool csv = false, json = false;
  auto* dump = app.add_subcommand("dump", "print every event of a trace");
  dump->add_option("dir", dir, "trace directory")->required();
  dump->add_flag("--csv", csv, "CSV: node,kind,ts,channel,tuple,pid,tid,cpu (ts in the node's TSC ticks)");
  auto* info = app.add_subcommand("info", "summarize a trace");
  info->add_option("dir", dir, "trace directory")->required();
  info->add_flag("--json", json, "machine-readable summary");
  std::string ctl_socket;
  std::vector<std::string> ctl_args;
  auto* config = app.add_subcommand("config", "change channel handlers of a running recording: "
                                              "config DIR|--socket PATH set CHANNEL HANDLER [PARAMS] | get");
  config->add_option("--socket", ctl_socket, "the recorder's control socket (instead of DIR)");
  config->add_option("args", ctl_args, "[DIR] set CHANNEL HANDLER [PARAMS...] | [DIR] get")->required();
  // Analysis and export (analysis_commands.h).
  std::string channel, out;
  std::vector<std::string> pairs;
  double period_ms = 1000;
  bool force = false;
  auto* tput = app.add_subcommand("throughput", "user events per period per channel");
  tput->add_option("dir", dir, "trace directory")->required();
  tput->add_option("--channel", channel, "only this channel");
  tput->add_option("--period", period_ms, "period in ms, aligned to the trace start (default 1000)");
  tput->add_flag("--csv", csv, "CSV: period,start_s,channel,events");
  tput->add_flag("--json", json, "JSON: counts per channel");
  bool tput_net = false;
  tput->add_flag("--net", tput_net, "application bytes per period per connection (socket events of record --net)");
  cptrace::RateOptions ropt;
  auto* rates = app.add_subcommand("rates", "non-blocking service rate behind a queue (channel pair)");
  rates->add_option("dir", dir, "trace directory")->required();
  rates->add_option("--channel-pair", pairs, "FROM,TO: enqueue (or in) and dequeue (or out) channels; repeatable")->required();
  rates->add_option("--period", ropt.period_ms, "sampling window T in ms (default 10)");
  rates->add_option("--min-windows", ropt.min_windows, "non-blocking windows needed for an estimate (default 30)");
  rates->add_option("--quantile", ropt.quantile, "quantile of the filtered samples (default 0.95)");
  rates->add_option("--tolerance", ropt.tolerance, "convergence: relative drift allowed (default 0.05)");
  rates->add_option("--sigma", ropt.sigma, "Gaussian filter width in windows (default 1)");
  rates->add_flag("--csv", csv, "CSV output");
  rates->add_flag("--json", json, "JSON output");
  auto* report = app.add_subcommand("report", "self-contained HTML report");
  report->add_option("dir", dir, "trace directory (one node's, or translated by cptrace translate)")->required();
  report->add_option("-o,--output", out, "HTML file to write")->required();
  report->add_option("--pair", pairs, "FROM,TO channel pair for latency plots; repeatable");
  auto* report_period = report->add_option("--period", period_ms, "throughput period in ms (default: automatic)");
  std::string format;
  auto* exp = app.add_subcommand("export", "export a trace: ctf (babeltrace2, Trace Compass), json (Chrome/Perfetto), csv");
  exp->add_option("format", format, "ctf, json or csv")->required();
  exp->add_option("dir", dir, "trace directory")->required();
  exp->add_option("-o,--output", out, "output (a directory for ctf, a file otherwise)")->required();
  exp->add_flag("-f,--force", force, "overwrite an existing output");
  auto* check = app.add_subcommand("check", "can this machine record? (root, BTF, uprobes, nop5 path, TSC, ring buffer)");

  cptrace::TranslateOptions tr;
  auto* translate = app.add_subcommand("translate", "put every node's events on the reference node's TSC, with bounds");
  translate->add_option("dirs", tr.dirs, "trace directories, one per node")->required();
  translate->add_option("--reference", tr.reference, "node whose TSC is the common timebase")->required();
  translate->add_option("-o,--output", tr.out, "translated trace directory to create")->required();
  translate->add_option("--method", tr.method, "ratio (MinRTT1/MinRTT2), hull (convex hulls) or best (both, intersected)")
      ->check(CLI::IsMember({"ratio", "hull", "best"}));
  translate->add_flag("-f,--force", tr.overwrite, "overwrite an existing trace in the output directory");
  std::string lat_from, lat_to;
  auto* latency = app.add_subcommand("latency", "per-tuple durations between two channels, with bounds");
  latency->add_option("dir", dir, "translated trace directory")->required();
  latency->add_option("--from", lat_from, "channel of the first event")->required();
  latency->add_option("--to", lat_to, "channel of the second event")->required();
  latency->add_flag("--csv", csv, "one CSV row per tuple instead of the summary");
  auto minrttd = cptrace::add_minrttd_command(app);
  auto sync = cptrace::add_sync_command(app);
  auto run_load_command = cptrace::add_load_commands(app);  // gen, sink, maxrate, overhead

  CLI11_PARSE(app, argc, argv);
  try {
    if (*record) return cptrace::run_record(rec);
    if (*dump) return cptrace::cmd_dump(dir, csv);
    if (*info) return cptrace::cmd_info(dir, json);
    if (*check) return cptrace::cmd_check();
    if (*config) return cptrace::cmd_config(ctl_socket, ctl_args);
    if (*translate) return cptrace::cmd_translate(tr);
    if (*latency) return cptrace::cmd_latency(dir, lat_from, lat_to, csv);
    if (*minrttd.first) return minrttd.second();
    if (*sync.first) return sync.second();
    if (auto rc = run_load_command()) return *rc;
    if (*tput && tput_net) {
      if (!channel.empty()) throw std::runtime_error("--net and --channel exclude each other");
      return cptrace::cmd_net_throughput(dir, period_ms, csv, json);
    }
    if (*tput) return cptrace::cmd_throughput(dir, channel, period_ms, csv, json);
    if (*rates) return cptrace::cmd_rates(dir, pairs, ropt, csv, json);
    if (*report)
      return cptrace::cmd_report(dir, out, pairs, report_period->count() ? std::optional(period_ms) : std::nullopt);
    if (*exp) return cptrace::cmd_export(format, dir, out, force);
  } catch (const std::exception& e) {
    fprintf(stderr, "cptrace %s: %s\n", app.get_subcommands().front()->get_name().c_str(), e.what());
    return 1;
  }
  return 0;
}
