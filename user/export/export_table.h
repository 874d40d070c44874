// `cptrace export table OUT -o DIR [--pair FROM,TO]... [--plain|--parquet]`: a
// translated trace (`cptrace translate`) as tables that DuckDB, Spark or pandas
// read without cptrace, schema in docs/analysis-export.md: CSV zstd-compressed
// as it is written (zstd_csv_writer.h: events.csv.zst, latency.csv.zst;
// --plain: the same text uncompressed, events.csv, latency.csv), or Parquet
// (parquet_writer.h: events.parquet, latency.parquet; the same rows and values):
//   events       one row per event: node, channel, tuple, pid/tid/cpu, local TSC,
//                reference-TSC instant with its strict bound, and the same in ns
//                since the reference's span start;
//   latency      per --pair one row per tuple: exactly the rows of `cptrace
//                latency` (scenario, ticks and ns with strict bounds).
// Per-tuple bounds of a local or remote-remote-direct duration come from the
// clock relations, which SQL cannot redo from the events; so they are exported
// as computed, and a query over the latency table gives `latency`'s summary exactly.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tables/zstd_csv_writer.h"
#include "tables/memory_budget.h"
#include "os/out_file.h"

namespace cptrace {

class TraceReader;

struct TableExportStats {
  uint64_t events = 0;
  uint64_t latency_rows = 0;
};

// The form of the tables in the directory.
enum class TableForm { Zstd, Plain, Parquet };

// A table's file name in the export: "events" -> events.csv.zst, events.csv
// (Plain), events.parquet (Parquet).
std::string table_file_name(const std::string& stem, TableForm form);

// Whether `name` is one of the tables `stems` in any form (and its temporary):
// -f clears an export of another form (or of a version before .zst) instead of
// leaving two tables of one name side by side.
bool is_table_file(const std::string& name, std::initializer_list<const char*> stems);

// One CSV table of an export (also netlat's, export_netlat.h): `STEM.csv.zst`, or `STEM.csv` with --plain, or
// the plain text on stdout (export_table_stdout); the same text every way.
class TableFile {
 public:
  // `background`: compressed on a thread of its own (ZstdCsvWriter).
  TableFile(const OutputDir& dir, const std::string& stem, TableForm form, bool background) {
    if (form == TableForm::Plain)
      plain_.emplace(dir, table_file_name(stem, form));
    else
      zst_.emplace(dir, table_file_name(stem, form), ZstdCsvWriter::kLevel, background);
  }
  explicit TableFile(OutFile::Stdout s) { plain_.emplace(s); }
  void write(std::string_view text) { plain_ ? plain_->write(text) : zst_->write(text); }
  void close() { plain_ ? plain_->close() : zst_->close(); }

 private:
  std::optional<OutFile> plain_;
  std::optional<ZstdCsvWriter> zst_;
};

// Throws std::runtime_error (naming the cause) on a trace that is not translated
// or is damaged, an unknown channel, or an output directory that already holds
// an export (unless overwrite).
TableExportStats export_table(const TraceReader& r, const std::string& out,
                              const std::vector<std::pair<std::string, std::string>>& pairs, bool overwrite,
                              TableForm form = TableForm::Zstd, const MemoryBudget& budget = {});

// One table ("events", or "latency" of `pairs`) as plain CSV text on stdout and
// nothing else written, for a reader at the other end of a pipe: the Parquet
// export (tools/duckdb/export-parquet.mjs) streams it into DuckDB, so no
// table-sized intermediate file is made. The same rows, through the same row
// writers, as the file export. Throws as export_table, and on a write error
// (the reader gone: EPIPE) naming stdout.
TableExportStats export_table_stdout(const TraceReader& r, const std::string& table,
                                     const std::vector<std::pair<std::string, std::string>>& pairs,
                                     const MemoryBudget& budget = {});

}  // namespace cptrace
