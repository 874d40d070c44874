// cptrace: the command line. Each subcommand lives in its own file; this only
// parses arguments (CLI11) and turns exceptions into one clear line + exit 1.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "commands.h"
#include "latency.h"
#include "minrtt_cli.h"
#include "recorder.h"
#include "translate.h"

int main(int argc, char** argv) {
  CLI::App app{"cptrace: cross-machine durations with strict error bounds"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cptrace 0.1 (trace format 1)");

  cptrace::RecordOptions rec;
  auto* record = app.add_subcommand("record", "record cp_logTS events into a trace directory (root)");
  record->add_option("-o,--output", rec.out_dir, "trace directory to create")->required();
  record->add_option("--lib", rec.libs, "ELF file holding the probe stubs (libcptrace.so or a static executable); repeatable");
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
  cptrace::add_minrtt_record_options(record, rec.minrtt);
  record->add_option("cmd", rec.cmd, "command to run and record (after --)");

  std::string dir;
  bool csv = false, json = false;
  auto* dump = app.add_subcommand("dump", "print every event of a trace");
  dump->add_option("dir", dir, "trace directory")->required();
  dump->add_flag("--csv", csv, "CSV: node,kind,ts,channel,tuple,pid,tid,cpu (ts in the node's TSC ticks)");
  auto* info = app.add_subcommand("info", "summarize a trace");
  info->add_option("dir", dir, "trace directory")->required();
  info->add_flag("--json", json, "machine-readable summary");
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

  CLI11_PARSE(app, argc, argv);
  try {
    if (*record) return cptrace::run_record(rec);
    if (*dump) return cptrace::cmd_dump(dir, csv);
    if (*info) return cptrace::cmd_info(dir, json);
    if (*check) return cptrace::cmd_check();
    if (*translate) return cptrace::cmd_translate(tr);
    if (*latency) return cptrace::cmd_latency(dir, lat_from, lat_to, csv);
    if (*minrttd.first) return minrttd.second();
    if (*sync.first) return sync.second();
  } catch (const std::exception& e) {
    fprintf(stderr, "cptrace %s: %s\n", app.get_subcommands().front()->get_name().c_str(), e.what());
    return 1;
  }
  return 0;
}
