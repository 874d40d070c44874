// Streaming zstd compression of an exported table (zstd_csv_writer.h).
#include "tables/zstd_csv_writer.h"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "os/output_dir.h"

namespace cptrace {
namespace {

// Text is handed to zstd in pieces of at least this much: one call per row
// would cost more in calls than in compressing.
constexpr size_t kChunk = size_t(1) << 18;

}  // namespace

ZstdCsvWriter::ZstdCsvWriter(const OutputDir& dir, const std::string& name, int level, bool background)
    : file_(dir, name), cctx_(ZSTD_createCCtx(), ZSTD_freeCCtx), out_size_(ZSTD_CStreamOutSize()) {
  if (!cctx_) throw std::runtime_error(fmt::format("{}: zstd: cannot create a compression context", path()));
  // The checksum lets a reader tell a damaged file from a table.
  for (auto [param, value] : {std::pair{ZSTD_c_compressionLevel, level}, std::pair{ZSTD_c_checksumFlag, 1}}) {
    size_t r = ZSTD_CCtx_setParameter(cctx_.get(), param, value);
    if (ZSTD_isError(r)) fail(r);
  }
  pending_.reserve(kChunk);
  out_ = std::make_unique<char[]>(out_size_);
  if (background) worker_ = std::make_unique<BackgroundJob>([this] { compress(chunk_, ZSTD_e_continue); });
}

ZstdCsvWriter::~ZstdCsvWriter() = default;

void ZstdCsvWriter::wait_idle() {
  if (worker_) worker_->wait();
}

void ZstdCsvWriter::submit() {
  wait_idle();
  chunk_.swap(pending_);
  pending_.clear();
  worker_->start();
}

void ZstdCsvWriter::write(std::string_view text) {
  text_bytes_ += text.size();
  if (worker_) {
    // The caller's text is copied: its buffer is refilled while zstd works.
    pending_.append(text);
    if (pending_.size() >= kChunk) submit();
    return;
  }
  if (pending_.size() + text.size() < kChunk) {
    pending_.append(text);
    return;
  }
  // A chunk is complete: what waited first, then the new text (a large piece
  // goes to zstd as it is, without a copy).
  if (!pending_.empty()) {
    compress(pending_, ZSTD_e_continue);
    pending_.clear();
  }
  if (text.size() >= kChunk)
    compress(text, ZSTD_e_continue);
  else
    pending_.append(text);
}

void ZstdCsvWriter::close() {
  wait_idle();
  compress(pending_, ZSTD_e_end);
  pending_.clear();
  file_.close();
}

// Hands `text` to zstd and writes what comes out; ZSTD_e_end also flushes
// zstd's buffers and ends the frame.
void ZstdCsvWriter::compress(std::string_view text, ZSTD_EndDirective mode) {
  ZSTD_inBuffer in{text.data(), text.size(), 0};
  for (;;) {
    ZSTD_outBuffer out{out_.get(), out_size_, 0};
    size_t left = ZSTD_compressStream2(cctx_.get(), &out, &in, mode);
    if (ZSTD_isError(left)) fail(left);
    file_.write(out.dst, out.pos);
    // e_continue is done once the input is taken; e_end once nothing is left to flush.
    if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) return;
  }
}

void ZstdCsvWriter::fail(size_t zstd_code) const {
  throw std::runtime_error(fmt::format("{}: zstd: {}", path(), ZSTD_getErrorName(zstd_code)));
}

}  // namespace cptrace
