// bench_translate_zstd: what compressing `translate`'s output costs per event,
// at the level it writes (1) and at the faster ones it could (negative levels,
// none), on the Translated frames of a translated run: their raw and stored
// bytes per event, and the compression's CPU time (this thread's, median of 5
// passes over every frame). The bytes on disk are level 1's; the other rows
// say what another level would give, without changing it.
//
//   bench_translate_zstd TRANSLATED_DIR
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include <zstd.h>

#include "trace/trace_reader.h"

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

template <class F>
double median_seconds(F pass) {
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = cpu_seconds();
    pass();
    t.push_back(cpu_seconds() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_translate_zstd TRANSLATED_DIR\n");
    return 2;
  }
  const cptrace::TraceReader r(argv[1]);
  std::vector<std::vector<uint8_t>> raws;
  uint64_t events = 0, stored = 0, raw_bytes = 0;
  ZSTD_DCtx* d = ZSTD_createDCtx();
  for (size_t pos : r.frame_positions(cptrace::FrameType::Translated)) {
    cptrace::FrameHeader h{};
    std::vector<uint8_t> payload;
    r.read_frame(pos, h, payload);
    std::vector<uint8_t> raw(h.raw_len);
    if (ZSTD_isError(ZSTD_decompressDCtx(d, raw.data(), raw.size(), payload.data(), payload.size()))) return 1;
    raws.push_back(std::move(raw));
    events += h.count, stored += payload.size(), raw_bytes += h.raw_len;
  }
  ZSTD_freeDCtx(d);
  if (events == 0) {
    std::fprintf(stderr, "bench_translate_zstd: %s holds no translated events\n", argv[1]);
    return 1;
  }
  std::printf("output frames: %zu, %.2f raw bytes/event, %.2f stored (level 1)\n", raws.size(),
              double(raw_bytes) / double(events), double(stored) / double(events));
  ZSTD_CCtx* c = ZSTD_createCCtx();
  size_t widest = 0;
  for (const auto& raw : raws) widest = std::max(widest, raw.size());
  std::vector<uint8_t> out(ZSTD_compressBound(widest));
  for (int level : {1, -1, -3, -5, -10}) {
    uint64_t size = 0;
    double s = median_seconds([&] {
      size = 0;
      for (const auto& raw : raws) size += ZSTD_compressCCtx(c, out.data(), out.size(), raw.data(), raw.size(), level);
    });
    std::printf("  zstd level %3d: %6.1f ns/event of CPU, %6.2f bytes/event%s\n", level, s * 1e9 / double(events),
                double(size) / double(events), level == 1 ? " (what translate writes)" : "");
  }
  double s = median_seconds([&] {
    for (const auto& raw : raws) std::memcpy(out.data(), raw.data(), raw.size());
  });
  std::printf("  uncompressed:   %6.1f ns/event of CPU (a copy), %6.2f bytes/event\n", s * 1e9 / double(events),
              double(raw_bytes) / double(events));
  ZSTD_freeCCtx(c);
}
