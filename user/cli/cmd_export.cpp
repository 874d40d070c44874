// `cptrace export ctf|json|csv DIR -o OUT`.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "analyze/export_csv.h"
#include "analyze/export_ctf.h"
#include "analyze/export_json.h"
#include "analyze/export_table.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "trace/trace_timeline.h"
#include "latency/latency.h"
#include "translate/sync_sanity.h"

namespace cptrace {

namespace {

struct ExportArgs {
  std::string format, dir, out;
  std::vector<std::string> pairs;  // table: FROM,TO
  bool overwrite = false;
  bool accept_suspect_sync = false;
  bool plain = false;  // table: .csv rather than .csv.zst
  bool parquet = false;  // table: .parquet rather than .csv.zst
  std::string stdout_table;  // table: this one table's plain CSV on stdout, no directory
  MemoryBudget budget;  // table: for the latency rows
};

// `export table`: a translated trace as tables for SQL, CSV zstd-compressed
// unless --plain, or Parquet (export_table.h).
int run_export_table(const ExportArgs& a) {
  if (a.out.empty() && a.stdout_table.empty()) throw std::runtime_error("export table needs -o DIR or --stdout TABLE");
  if (a.parquet && a.plain) throw std::runtime_error("--parquet and --plain exclude each other");
  if (a.parquet && !a.stdout_table.empty())
    throw std::runtime_error("--stdout writes CSV text; --parquet needs -o DIR");
  const TableForm form = a.parquet ? TableForm::Parquet : a.plain ? TableForm::Plain : TableForm::Zstd;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& p : a.pairs) {
    size_t comma = p.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == p.size() ||
        p.find(',', comma + 1) != std::string::npos)
      throw std::runtime_error("--pair '" + p + "': expected FROM,TO (two channel names)");
    pairs.emplace_back(p.substr(0, comma), p.substr(comma + 1));
  }
  std::vector<SyncFinding> suspect = suspect_findings(a.dir, a.accept_suspect_sync);
  auto r = open_trace(a.dir);
  if (!a.stdout_table.empty()) {
    TableExportStats s = export_table_stdout(*r, a.stdout_table, pairs, a.budget);
    fmt::print(stderr, "cptrace export: {} {} -> stdout\n", a.stdout_table == "events" ? s.events : s.latency_rows,
               a.stdout_table == "events" ? "events" : "tuple rows");
    for (const SyncFinding& f : suspect) fmt::print(stderr, "{}\n", suspect_sync_warning(f));
    return 0;
  }
  TableExportStats s = export_table(*r, a.out, pairs, a.overwrite, form, a.budget);
  fmt::print(stderr, "cptrace export: {} events -> {}/{}", s.events, a.out, table_file_name("events", form));
  // No --pair, no latency table: nothing to name.
  if (!pairs.empty())
    fmt::print(stderr, ", {} tuple rows of {} pair(s) -> {}/{}", s.latency_rows, pairs.size(), a.out,
               table_file_name("latency", form));
  fmt::print(stderr, "\n");
  for (const SyncFinding& f : suspect) fmt::print(stderr, "{}\n", suspect_sync_warning(f));
  return 0;
}

int run_export(const ExportArgs& a) {
  const std::string& format = a.format;
  const std::string& out = a.out;
  if (format == "table") return run_export_table(a);
  if (format != "ctf" && format != "json" && format != "csv")
    throw std::runtime_error("unknown format '" + format + "' (ctf, json, csv or table)");
  if (!a.stdout_table.empty()) throw std::runtime_error("--stdout applies to export table only");
  if (out.empty()) throw std::runtime_error("export " + format + " needs -o OUT");
  if (!a.pairs.empty()) throw std::runtime_error("--pair applies to export table only");
  if (a.plain) throw std::runtime_error("--plain applies to export table only");
  if (a.parquet) throw std::runtime_error("--parquet applies to export table only");
  auto r = open_trace(a.dir);
  Timeline tl = trace_timeline(*r);
  // CTF output is a directory: export_ctf() checks it itself.
  if (format != "ctf" && !a.overwrite && std::filesystem::exists(out))
    throw std::runtime_error(out + ": exists (use -f to overwrite)");
  if (format == "ctf") {
    CtfStats s = export_ctf(*r, tl, out, a.overwrite);
    fmt::print(stderr, "cptrace export: {} events in {} stream(s) ({} for late events), {} packets -> {}\n", s.events,
               s.streams, s.late_streams, s.packets, out);
  } else {
    uint64_t n = format == "json" ? export_json(*r, tl, out) : export_csv(*r, tl, out);
    fmt::print(stderr, "cptrace export: {} events -> {}\n", n, out);
  }
  return damaged_trace_exit(*r, "export", "the export holds the events before it");
}

}  // namespace

SubcommandRunner add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* exp =
      app.add_subcommand("export",
                         "export a trace: ctf (babeltrace2, Trace Compass), json (Chrome/Perfetto), csv; table: "
                         "a translated trace as zstd-compressed CSV or Parquet tables for SQL (DuckDB, Spark)");
  exp->add_option("format", a->format, "ctf, json, csv or table")->required();
  exp->add_option("dir", a->dir, "trace directory (translated, for table)")->required();
  auto* out = exp->add_option("-o,--output", a->out, "output (a directory for ctf and table, a file otherwise)");
  exp->add_flag("-f,--force", a->overwrite, "overwrite an existing output");
  exp->add_option("--pair", a->pairs, "table: also latency.csv.zst rows of this channel pair FROM,TO (repeatable)");
  auto* plain =
      exp->add_flag("--plain", a->plain, "table: uncompressed events.csv, latency.csv (default: zstd, .csv.zst)");
  exp->add_flag("--parquet", a->parquet,
                "table: Parquet events.parquet, latency.parquet, zstd pages (default: zstd CSV, .csv.zst)")
      ->excludes(plain);
  // For a pipe into another program (tools/duckdb/export-parquet.mjs), instead of -o.
  exp->add_option("--stdout", a->stdout_table,
                  "table: write only this table (events or latency) as plain CSV to stdout, instead of -o DIR")
      ->type_name("TABLE")
      ->excludes(out);
  exp->add_flag(
      "--accept-suspect-sync", a->accept_suspect_sync,
      "table: export a trace translated with --accept-suspect-sync (default: refuse), with a WARNING line per "
      "finding");
  add_memory_options(exp, a->budget);
  return {exp, [a] { return run_export(*a); }};
}

}  // namespace cptrace
