// `cptrace export ctf|json|csv|table DIR -o OUT`: one CLI11 subcommand per
// format, each with only its own options, so that an option of another format
// is refused by the parser (export/export_run.cpp does the export).
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "export/export_run.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace cptrace {

namespace {

// What the command line gives; only the subcommand chosen is read.
struct ExportArgs {
  ExportEventsOptions events;  // ctf, json, csv
  ExportTableOptions table;
  std::vector<std::string> pairs;  // table: --pair as typed
  bool plain = false, parquet = false;  // table: the form, if not zstd CSV
};

// ctf, json and csv: one event per record, any trace; -o is the output.
CLI::App* add_events_format(CLI::App* exp, const char* name, const char* what, const char* out_help,
                            ExportEventsOptions& o) {
  auto* sub = exp->add_subcommand(name, what);
  sub->add_option("dir", o.dir, "trace directory")->required();
  sub->add_option("-o,--output", o.out, out_help)->required();
  sub->add_flag("-f,--force", o.overwrite, "overwrite an existing output");
  return sub;
}

CLI::App* add_table_format(CLI::App* exp, ExportArgs& a) {
  ExportTableOptions& o = a.table;
  auto* sub = exp->add_subcommand(
      "table", "a translated trace as zstd-compressed CSV or Parquet tables for SQL (DuckDB, Spark)");
  sub->add_option("dir", o.dir, "trace directory translated by cptrace translate")->required();
  auto* out = sub->add_option("-o,--output", o.out, "output directory");
  sub->add_flag("-f,--force", o.overwrite, "overwrite an existing output");
  add_pair_option(sub, a.pairs, "also latency.csv.zst rows of this channel pair FROM,TO (repeatable)");
  auto* plain = sub->add_flag("--plain", a.plain, "uncompressed events.csv, latency.csv (default: zstd, .csv.zst)");
  sub->add_flag("--parquet", a.parquet,
                "Parquet events.parquet, latency.parquet, zstd pages (default: zstd CSV, .csv.zst)")
      ->excludes(plain);
  // For a pipe into another program (tools/duckdb/export-parquet.mjs), instead of -o.
  sub->add_option("--stdout", o.stdout_table,
                  "write only this table (events or latency) as plain CSV to stdout, instead of -o DIR")
      ->type_name("TABLE")
      ->excludes(out);
  sub->add_flag("--accept-suspect-sync", o.accept_suspect_sync,
                "export a trace translated with --accept-suspect-sync (default: refuse), with a WARNING line per "
                "finding");
  add_memory_options(sub, o.budget);
  return sub;
}

}  // namespace

SubcommandRunner add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* exp =
      app.add_subcommand("export",
                         "export a trace: ctf (babeltrace2, Trace Compass), json (Chrome/Perfetto), csv; table: "
                         "a translated trace as zstd-compressed CSV or Parquet tables for SQL (DuckDB, Spark)");
  exp->require_subcommand(0, 1);
  auto* ctf =
      add_events_format(exp, "ctf", "a CTF 1.8 trace (babeltrace2, Trace Compass)", "output directory", a->events);
  auto* json = add_events_format(exp, "json", "Chrome / Perfetto trace-event JSON", "output file", a->events);
  add_events_format(exp, "csv", "every event as a CSV row", "output file", a->events);
  auto* table = add_table_format(exp, *a);
  // The format is a subcommand; a word that is none is named in the error (CLI11
  // would only say that a subcommand is required). Set after the formats are
  // added, which would inherit it and take options that are not theirs.
  exp->allow_extras();
  return {exp, [a, exp, ctf, json, table] {
            if (exp->get_subcommands().empty()) {
              const std::vector<std::string> rest = exp->remaining();
              throw std::runtime_error(
                  rest.empty() ? std::string("a format is required (ctf, json, csv or table)")
                               : fmt::format("unknown format '{}' (ctf, json, csv or table)", rest.front()));
            }
            if (*table) {
              a->table.pairs = channel_pairs(a->pairs);
              a->table.form = a->parquet ? TableForm::Parquet : a->plain ? TableForm::Plain : TableForm::Zstd;
              return run_export_table(a->table);
            }
            return run_export_events(*ctf ? EventFormat::Ctf : *json ? EventFormat::Json : EventFormat::Csv, a->events);
          }};
}

}  // namespace cptrace
