// `cptrace export`: what the command does around each format's writer.
#include "export/export_run.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "export/export_csv.h"
#include "export/export_ctf.h"
#include "export/export_json.h"
#include "trace/trace_timeline.h"
#include "latency/latency.h"
#include "translate/sync_sanity.h"
#include "os/say.h"

namespace cptrace {

int run_export_table(const ExportTableOptions& o) {
  if (o.out.empty() && o.stdout_table.empty()) throw std::runtime_error("export table needs -o DIR or --stdout TABLE");
  if (o.form == TableForm::Parquet && !o.stdout_table.empty())
    throw std::runtime_error("--stdout writes CSV text; --parquet needs -o DIR");
  std::vector<SyncFinding> suspect = suspect_findings(o.dir, o.accept_suspect_sync);
  auto r = open_trace(o.dir);
  if (!o.stdout_table.empty()) {
    TableExportStats s = export_table_stdout(*r, o.stdout_table, o.pairs, o.budget);
    say("{} {} -> stdout", o.stdout_table == "events" ? s.events : s.latency_rows,
        o.stdout_table == "events" ? "events" : "tuple rows");
    for (const SyncFinding& f : suspect) say_line(suspect_sync_warning(f));
    return 0;
  }
  TableExportStats s = export_table(*r, o.out, o.pairs, o.overwrite, o.form, o.budget);
  std::string line = fmt::format("{} events -> {}/{}", s.events, o.out, table_file_name("events", o.form));
  // No --pair, no latency table: nothing to name.
  if (!o.pairs.empty())
    line += fmt::format(", {} tuple rows of {} pair(s) -> {}/{}", s.latency_rows, o.pairs.size(), o.out,
                        table_file_name("latency", o.form));
  say_line(line);
  for (const SyncFinding& f : suspect) say_line(suspect_sync_warning(f));
  return 0;
}

int run_export_events(EventFormat format, const ExportEventsOptions& o) {
  auto r = open_trace(o.dir);
  Timeline tl = trace_timeline(*r);
  // CTF output is a directory: export_ctf() checks it itself.
  if (format != EventFormat::Ctf && !o.overwrite && std::filesystem::exists(o.out))
    throw std::runtime_error(o.out + ": exists (use -f to overwrite)");
  if (format == EventFormat::Ctf) {
    CtfStats s = export_ctf(*r, tl, o.out, o.overwrite);
    say("{} events in {} stream(s) ({} for late events), {} packets -> {}", s.events, s.streams, s.late_streams,
        s.packets, o.out);
  } else {
    uint64_t n = format == EventFormat::Json ? export_json(*r, tl, o.out) : export_csv(*r, tl, o.out);
    say("{} events -> {}", n, o.out);
  }
  return damaged_trace_exit(*r, "the export holds the events before it");
}

}  // namespace cptrace
