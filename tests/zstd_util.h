// Reading the zstd-compressed tables of `export table` (NAME.csv.zst) back as
// text in the tests, through libzstd's streaming decoder as any reader would.
#pragma once
#include <zstd.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "test_util.h"

namespace testutil {

// The text of a whole .zst file. Throws (naming the file) on a damaged frame,
// a checksum mismatch, and a file that ends inside a frame: a truncated table
// must not pass for a shorter one.
inline std::string read_zst(const fs::path& p) {
  std::string in = read_file(p);
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> d(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::string text, buf(ZSTD_DStreamOutSize(), '\0');
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  size_t left = 0;
  // On while input is left, or while a full output buffer says zstd may hold more.
  for (bool more = true; more;) {
    ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
    left = ZSTD_decompressStream(d.get(), &ob, &ib);
    if (ZSTD_isError(left)) throw std::runtime_error(p.string() + ": zstd: " + ZSTD_getErrorName(left));
    text.append(buf.data(), ob.pos);
    more = ib.pos < ib.size || ob.pos == ob.size;
  }
  if (left != 0) throw std::runtime_error(p.string() + ": zstd: the file ends inside a frame (truncated)");
  return text;
}

}  // namespace testutil
