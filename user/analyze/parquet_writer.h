// A Parquet file written while its rows are made (`export table --parquet`).
//
// Only what the export tables need, no general Parquet library (none is
// packaged in Debian 12): flat schemas of required columns, whose types are
// those DuckDB's COPY ... (FORMAT parquet) gave the same tables (physical type
// with a converted type: UTF8 strings, UINT_16/UINT_32/UINT_64 and INT_64
// integers, booleans), and optional columns that are NULL on every row (the ns
// columns of a trace without a measured frequency). Encodings: integers
// DELTA_BINARY_PACKED (timestamps in time order shrink to a few bits a value
// before zstd sees them), strings RLE_DICTIONARY (every string column of the
// tables takes a handful of values), booleans PLAIN; every page zstd-compressed.
//
// With `background`, a page is encoded and compressed on a thread of its own
// while the next one is filled (the encoding is a fifth of the work, filling
// and what the caller computes for it the rest).
//
// Memory: the values of two pages per column (kPageRows), and the compressed
// pages of one row group (a column chunk's pages are contiguous in the file,
// so a row group is written whole once its last row is in). The footer (file
// metadata, Thrift compact protocol) goes out at close().
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace/out_file.h"

namespace cptrace {

class ParquetWriter {
 public:
  enum class Kind : uint8_t { Bool, UInt16, UInt32, Int64, UInt64, String };
  struct ColumnSpec {
    std::string name;
    Kind kind;
    bool all_null = false;  // optional, NULL on every row: takes no values
  };
  // Rows per page and per row group at most: ~1 M rows a group, the unit a
  // reader splits on; pages of 8 bytes a value, 1 MiB a column.
  static constexpr size_t kPageRows = size_t(1) << 17;
  static constexpr size_t kRowGroupRows = kPageRows * 8;
  struct Shape {
    size_t page_rows = kPageRows, group_rows = kRowGroupRows;
  };
  // Pages and row groups that fit in `memory` bytes: two pages of values per
  // column, and a row group's compressed pages at kPackedRowBytes a row.
  static Shape shape_for(uint64_t memory, size_t columns);
  static constexpr size_t kPackedRowBytes = 64;  // measured 17-22 on the export tables

  // Writes to `out` (from its current position, which must be its start).
  ParquetWriter(OutFile& out, std::vector<ColumnSpec> columns, bool background, Shape shape);
  ParquetWriter(const ParquetWriter&) = delete;
  ParquetWriter& operator=(const ParquetWriter&) = delete;
  ~ParquetWriter();

  // One value per row for each column that is not all_null, in row order; the
  // integer kinds take their value as int64 (a UInt64 as its bit pattern).
  void put_int(size_t col, int64_t v) { cols_[col].values.push_back(v); }
  void put_bool(size_t col, bool v) { cols_[col].values.push_back(v); }
  // A String column's value is a code from code(): the strings are kept once.
  void put_code(size_t col, uint32_t code) { cols_[col].values.push_back(code); }
  uint32_t code(size_t col, std::string_view s);
  // After every column had the row's value.
  void end_row() {
    if (++page_rows_ == shape_.page_rows) end_page();
  }
  // Writes the last row group and the footer, and closes the file.
  void close();

  uint64_t rows() const { return rows_ + page_rows_; }

 private:
  struct Column {
    ColumnSpec spec;
    std::vector<int64_t> values;  // this page's (codes for String, 0/1 for Bool)
    std::vector<int64_t> encoding;  // the previous page's, while it is encoded
    size_t dict_size = 0;  // the dictionary's size when that page ended: its codes are below
    std::vector<std::string> dict;  // String: every value seen, by code
    std::unordered_map<std::string, uint32_t> dict_index;
    std::string pages;  // this row group's data pages, headers included, compressed
    uint64_t pages_raw = 0;  // their size uncompressed, headers included
  };
  struct ChunkMeta {
    int64_t offset, data_offset, dict_offset, raw, packed;
  };
  void end_page();
  void end_group();
  // Encodes the page of each column's `encoding` values (on the worker, if any).
  void encode_pages(size_t n);
  void encode_page(Column& c, size_t n);
  void wait_idle();  // the page being encoded is done (its error rethrown)
  void work();
  // Appends a page (header, then `body` zstd-compressed) to `to`; returns its uncompressed size.
  uint64_t append_page(std::string& to, int page_type, std::string_view body, size_t n, int encoding);
  void write(std::string_view s);
  std::string footer() const;

  OutFile& out_;
  std::vector<Column> cols_;
  Shape shape_;
  size_t page_rows_ = 0;  // rows of the page being filled
  uint64_t group_rows_ = 0;  // rows of the row group's finished pages
  uint64_t rows_ = 0;  // rows in finished pages
  int64_t offset_ = 0;  // bytes written to out_
  std::vector<std::vector<ChunkMeta>> groups_;  // per row group, per column
  std::vector<uint64_t> group_sizes_;  // rows per row group
  std::string body_, zbuf_;  // scratch for one page
  void* zctx_ = nullptr;  // ZSTD_CCtx
  bool closed_ = false;
  // The worker: it owns body_, zbuf_, zctx_ and the columns' `encoding` and
  // `pages` while busy_.
  std::mutex mu_;
  std::condition_variable cv_;
  size_t job_rows_ = 0;  // > 0: a page to encode
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace cptrace
