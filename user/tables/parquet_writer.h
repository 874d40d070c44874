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
// Every column chunk carries its min/max statistics (and null count) where
// the format defines their order: signed for INT_64, unsigned for the UINT_*
// columns (compared as unsigned, written as the physical type's bytes), false <
// true for booleans; the footer says so (column_orders: TYPE_ORDER). String
// columns carry none: their dictionary holds the values.
//
// Rows are given either one value at a time (put_int, ..., end_row: pages
// encoded on a thread of their own with `background`), or as whole pages that
// the caller fills and encodes on its own threads (Page, Encoder) and hands in
// row order to append(): the export's events table, filled from the frames as
// they are decoded, every thread doing the whole work of its pages.
//
// Memory: the values of the pages being filled or encoded (kPageRows), and the
// compressed pages of one row group (a column chunk's pages are contiguous in
// the file, so a row group is written whole once its last row is in). The
// footer (file metadata, Thrift compact protocol) goes out at close().
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "os/out_file.h"
#include "tables/background_job.h"

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
  // reader splits on; pages of 8 bytes a value, 128 KiB a column, so that a
  // page's columns are still in the cache when they are encoded after being
  // filled (measured: 13% less CPU than 1 MiB a column).
  static constexpr size_t kPageRows = size_t(1) << 14;
  static constexpr size_t kRowGroupRows = size_t(1) << 20;
  struct Shape {
    size_t page_rows = kPageRows, group_rows = kRowGroupRows;
  };
  // Pages and row groups that fit in `memory` bytes: `pages` pages of values
  // per column (being filled or encoded), and a row group's compressed pages
  // at kPackedRowBytes a row.
  static Shape shape_for(uint64_t memory, size_t columns, size_t pages = 2);
  static constexpr size_t kPackedRowBytes = 64;  // measured 17-22 on the export tables

  // One page's values, column by column (codes for String, 0/1 for Bool, an
  // integer kind's value as int64, a UInt64 as its bit pattern; nothing for an
  // all_null column), `rows` of them in each other column.
  struct Page {
    size_t rows = 0;
    std::vector<std::vector<int64_t>> values;
  };
  // A page encoded and compressed, with each column's least and greatest value.
  struct EncodedPage {
    struct Column {
      std::string bytes;  // page header and compressed body
      uint64_t raw = 0;  // its size uncompressed
      int64_t lo = 0, hi = 0;  // in the column's order (unsigned for the UInt kinds)
    };
    size_t rows = 0;
    std::vector<Column> columns;
  };
  // Encodes pages of `columns`; one per thread (a zstd context and scratch).
  class Encoder {
   public:
    Encoder();
    ~Encoder();
    Encoder(const Encoder&) = delete;
    Encoder& operator=(const Encoder&) = delete;
    void encode(const std::vector<ColumnSpec>& columns, const Page& in, EncodedPage& out);

   private:
    uint64_t append_page(std::string& to, int page_type, std::string_view body, size_t n, int encoding);
    friend class ParquetWriter;
    void* zctx_ = nullptr;  // ZSTD_CCtx
    std::string body_, zbuf_;
  };

  // Writes to `out` (from its current position, which must be its start).
  // `pages_only`: rows come only through append() (no page of put_* values held).
  ParquetWriter(OutFile& out, std::vector<ColumnSpec> columns, bool background, Shape shape, bool pages_only = false);
  ParquetWriter(const ParquetWriter&) = delete;
  ParquetWriter& operator=(const ParquetWriter&) = delete;
  ~ParquetWriter();

  const std::vector<ColumnSpec>& columns() const { return specs_; }
  const Shape& shape() const { return shape_; }

  // One value per row for each column that is not all_null, in row order (as
  // in Page).
  void put_int(size_t col, int64_t v) { cols_[col].values[page_rows_] = v; }
  void put_bool(size_t col, bool v) { cols_[col].values[page_rows_] = v; }
  // A String column's value is a code from code(): the strings are kept once.
  void put_code(size_t col, uint32_t code) { cols_[col].values[page_rows_] = code; }
  uint32_t code(size_t col, std::string_view s);
  // After every column had the row's value.
  void end_row() {
    if (++page_rows_ == shape_.page_rows) end_page();
  }
  // A page encoded by an Encoder, in row order; not mixed with put_*'s rows.
  // Its codes must come from code() before it was encoded.
  void append(EncodedPage& p);
  // Writes the last row group and the footer, and closes the file.
  void close();

  uint64_t rows() const { return rows_ + page_rows_; }

 private:
  struct Column {
    std::vector<int64_t> values;  // the page being filled by put_* (shape_.page_rows)
    std::vector<std::string> dict;  // String: every value given to code(), by code
    std::unordered_map<std::string, uint32_t> dict_index;
    std::string pages;  // this row group's data pages, headers included, compressed
    uint64_t pages_raw = 0;  // their size uncompressed, headers included
    bool any = false;  // lo, hi: of this row group's values
    int64_t lo = 0, hi = 0;
  };
  struct ChunkMeta {
    int64_t offset, data_offset, dict_offset, raw, packed;
    bool stats;
    int64_t lo, hi;
  };
  void end_page();
  void end_group();
  void wait_idle();  // the page being encoded is done (its error rethrown)
  void write(std::string_view s);
  std::string footer() const;

  OutFile& out_;
  std::vector<ColumnSpec> specs_;
  std::vector<Column> cols_;
  Shape shape_;
  size_t page_rows_ = 0;  // rows of the page being filled
  uint64_t group_rows_ = 0;  // rows of the row group's appended pages
  uint64_t rows_ = 0;  // rows in finished pages
  int64_t offset_ = 0;  // bytes written to out_
  std::vector<std::vector<ChunkMeta>> groups_;  // per row group, per column
  std::vector<uint64_t> group_sizes_;  // rows per row group
  Encoder encoder_;  // put_*'s pages and the dictionary pages
  // put_*'s page being encoded (on the worker, if any) and its result.
  Page job_;
  EncodedPage done_;
  bool pending_ = false;  // done_ (or job_ on the worker) not yet appended
  bool closed_ = false;
  // The worker: it owns encoder_, job_ and done_ while its job runs; last, so
  // that it is gone before what its job uses.
  std::unique_ptr<BackgroundJob> worker_;
};

}  // namespace cptrace
