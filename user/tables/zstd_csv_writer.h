// A zstd-compressed text file (`NAME.csv.zst`) written while its rows are made.
//
// `export table` writes tables of millions of rows: about 145 bytes a row as
// plain CSV, 15-25 compressed. The text comes in through write() in pieces of
// any size (a row, a frame's rows), is gathered into chunks and each chunk is
// compressed (ZSTD_compressStream2) and written out, so memory is the zstd
// context and two fixed buffers however many rows there are. The file is one
// zstd frame with a content checksum, which `zstd -d`, DuckDB's read_csv (by the
// .zst extension) and Hadoop's ZStandardCodec read as it is; a file cut short
// (a full disk) fails to decompress rather than passing for a shorter table.
//
// With `background`, each chunk is compressed and written on a thread of its
// own while the caller makes the next (compressing at level 1 takes longer
// than formatting the text). The file is the same byte for byte: zstd's
// output does not depend on how its input is cut into calls.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <zstd.h>

#include "os/out_file.h"
#include "tables/background_job.h"

namespace cptrace {

class OutputDir;

class ZstdCsvWriter {
 public:
  // Level 1, by measurement on two 5 M-event exports (docs/analysis-export.md):
  // level 3 was both larger (+12..25%) and slower; level 6 made the events
  // table 4-10% smaller but the latency table 13% larger, for 2-3x the CPU;
  // long-distance matching was no smaller (a CSV row repeats its neighbours,
  // not text megabytes back) and takes a 128 MiB window.
  static constexpr int kLevel = 1;

  // Creates `name` in `dir` (OutputDir::create: a new file, never through a
  // symlink). Errors name the file.
  ZstdCsvWriter(const OutputDir& dir, const std::string& name, int level = kLevel, bool background = false);
  ZstdCsvWriter(const ZstdCsvWriter&) = delete;
  ZstdCsvWriter& operator=(const ZstdCsvWriter&) = delete;
  ~ZstdCsvWriter();

  void write(std::string_view text);
  // Ends the zstd frame and closes the file. Without it (an exception on the
  // way) the file is left as a cut-short frame, which readers refuse.
  void close();

  uint64_t text_bytes() const { return text_bytes_; }
  const std::string& path() const { return file_.path(); }

 private:
  void compress(std::string_view text, ZSTD_EndDirective mode);
  [[noreturn]] void fail(size_t zstd_code) const;
  // Background: hands pending_ to the worker once it is done with the last chunk.
  void submit();
  void wait_idle();  // the worker's chunk is written (its error rethrown)

  OutFile file_;
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx_;
  std::string pending_;  // text not yet handed to zstd, less than kChunk
  std::unique_ptr<char[]> out_;
  size_t out_size_;
  uint64_t text_bytes_ = 0;
  // The worker owns cctx_, out_, file_ and chunk_ while its job runs; last,
  // so that it is gone before what its job uses.
  std::string chunk_;
  std::unique_ptr<BackgroundJob> worker_;
};

}  // namespace cptrace
