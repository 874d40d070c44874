// Events codec figures: compression ratio and single-core encode/decode speed of
// (a) plain zstd -1 over the raw TraceEvent array and (b) the columnar codecs:
// version 1 (block_codec.h, varints) and Events2 (events2_codec.h, what the
// recorder writes, from rows and from its RecordedEvents blocks), on the same
// events, frame by frame. The events are synthetic, or a recording's first 4 M
// when a trace is named (bench/run.sh passes the batch recording it made). Prints figures,
// never passes or fails.
//
// Synthetic recording: 4 threads, each pinned to its own CPU with a constant
// pid/tid, logging tuples through 3 channels (64-bit hashed ids) with tuple ids
// increasing per thread; a call every ~300 ns at 2.9 GHz with jitter; events
// arrive in per-CPU runs of up to 256 (one batch / ring drain).
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <zstd.h>

#include "trace/block_codec.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<TraceEvent> synthetic_recording(size_t n) {
  std::mt19937_64 rng(42);
  const uint64_t chan[3] = {0x5bd1e9955bd1e995ull, 0x87c37b91114253d5ull, 0x4cf5ad432745937full};
  uint64_t ts[4], tuple[4];
  for (int t = 0; t < 4; ++t) ts[t] = 8'000'000'000'000ull + rng() % 100000, tuple[t] = uint64_t(t) << 40;
  std::vector<TraceEvent> ev;
  ev.reserve(n);
  while (ev.size() < n) {
    int t = static_cast<int>(rng() % 4);
    size_t run = 1 + rng() % 256;
    for (size_t k = 0; k < run && ev.size() < n; ++k) {
      TraceEvent e;
      ts[t] += 870 - 90 + rng() % 181;  // 300 ns * 2.9 GHz, +-10 %
      e.ts = ts[t];
      int c = static_cast<int>(tuple[t] % 3);  // in -> work -> out, then the next tuple
      e.channel = chan[c];
      e.tuple = tuple[t] / 3;
      ++tuple[t];
      e.pid = 31337;
      e.tid = 31338 + t;
      e.cpu = static_cast<uint16_t>(2 * t);
      e.kind = static_cast<uint8_t>(EventKind::User);
      e.timebase = static_cast<uint8_t>(Timebase::Tsc);
      ev.push_back(e);
    }
  }
  return ev;
}

struct Figures {
  double bytes_out = 0, enc_s = 1e9, dec_s = 1e9;
};

template <class F>
double best_seconds(int reps, F f) {
  double best = 1e9;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

Figures plain_zstd(const std::vector<TraceEvent>& ev, size_t frame, int reps) {
  Figures fig;
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_DCtx* d = ZSTD_createDCtx();
  std::vector<std::vector<char>> out((ev.size() + frame - 1) / frame);
  fig.enc_s = best_seconds(reps, [&] {
    fig.bytes_out = 0;
    for (size_t i = 0, f = 0; i < ev.size(); i += frame, ++f) {
      size_t bytes = std::min(frame, ev.size() - i) * sizeof(TraceEvent);
      out[f].resize(ZSTD_compressBound(bytes));
      size_t z = ZSTD_compressCCtx(c, out[f].data(), out[f].size(), &ev[i], bytes, 1);
      out[f].resize(z);
      fig.bytes_out += z + sizeof(FrameHeader);
    }
  });
  std::vector<TraceEvent> back(frame);
  fig.dec_s = best_seconds(reps, [&] {
    for (auto& o : out) ZSTD_decompressDCtx(d, back.data(), frame * sizeof(TraceEvent), o.data(), o.size());
  });
  ZSTD_freeCCtx(c);
  ZSTD_freeDCtx(d);
  return fig;
}

// How the frames are made: version 1 from rows, Events2 from rows, or Events2
// from the collector's blocks (as the recorder encodes).
enum class Way { V1, V2Rows, V2Recorder };

Figures our_codec(const std::vector<TraceEvent>& ev, size_t frame, int reps, Way way, int level = 1) {
  Figures fig;
  std::vector<EncodedFrame> out((ev.size() + frame - 1) / frame);
  std::vector<RecordedEvents> blocks(way == Way::V2Recorder ? out.size() : 0);
  for (size_t i = 0, f = 0; f < blocks.size(); i += frame, ++f)
    blocks[f].assign(ev.begin() + i, ev.begin() + i + std::min(frame, ev.size() - i));
  fig.enc_s = best_seconds(reps, [&] {
    fig.bytes_out = 0;
    for (size_t i = 0, f = 0; i < ev.size(); i += frame, ++f) {
      const size_t k = std::min(frame, ev.size() - i);
      if (way == Way::V1)
        encode_events_version1(&ev[i], k, level, out[f]);
      else if (way == Way::V2Rows)
        encode_events_into(&ev[i], k, level, out[f]);
      else
        encode_recorded_into(blocks[f], level, out[f]);
      fig.bytes_out += out[f].payload.size() + sizeof(FrameHeader);
    }
  });
  std::vector<TraceEvent> back;
  size_t checked = 0;
  fig.dec_s = best_seconds(reps, [&] {
    checked = 0;
    for (auto& o : out) {
      decode_events_into(o.hdr, o.payload.data(), o.payload.size(), back);
      checked += back.size();
    }
  });
  if (checked != ev.size()) std::fprintf(stderr, "decode lost events!\n");
  return fig;
}

void print(const char* name, const Figures& f, size_t n) {
  double raw = double(n) * sizeof(TraceEvent);
  std::printf(
      "  %-22s %7.2f B/event  ratio %5.1fx (vs %zu-byte struct) %5.1fx (vs 32 B)  "
      "encode %6.0f MB/s %5.1f Mev/s  decode %6.0f MB/s %5.1f Mev/s\n",
      name, f.bytes_out / double(n), raw / f.bytes_out, sizeof(TraceEvent), 32.0 * n / f.bytes_out, raw / f.enc_s / 1e6,
      n / f.enc_s / 1e6, raw / f.dec_s / 1e6, n / f.dec_s / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<TraceEvent> ev;
  const char* what = "synthetic";
  if (argc > 1 && !std::isdigit(static_cast<unsigned char>(argv[1][0]))) {
    TraceReader r(argv[1]);
    r.for_each_batch([&](const std::vector<TraceEvent>& b) {
      if (ev.size() < 4'000'000) ev.insert(ev.end(), b.begin(), b.begin() + std::min(b.size(), 4'000'000 - ev.size()));
    });
    what = "recorded";
  } else {
    ev = synthetic_recording(argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4'000'000);
  }
  const size_t n = ev.size();
  std::printf("bench_codec: %zu %s events (%zu-byte TraceEvent, %.0f MB raw), one core, best of 3\n", n, what,
              sizeof(TraceEvent), double(n) * sizeof(TraceEvent) / 1e6);
  for (size_t frame : {4096, 16384, 65536}) {
    std::printf("frames of %zu events:\n", frame);
    print("plain zstd -1 (structs)", plain_zstd(ev, frame, 3), n);
    print("v1 varints + zstd -1", our_codec(ev, frame, 3, Way::V1), n);
    print("v1 varints + zstd -5", our_codec(ev, frame, 3, Way::V1, -5), n);
    print("v1 varints, no zstd", our_codec(ev, frame, 3, Way::V1, 0), n);
    print("v2 rows + zstd -1", our_codec(ev, frame, 3, Way::V2Rows), n);
    print("v2 recorder + zstd -1", our_codec(ev, frame, 3, Way::V2Recorder), n);
    print("v2 recorder + zstd -5", our_codec(ev, frame, 3, Way::V2Recorder, -5), n);
    print("v2 recorder, no zstd", our_codec(ev, frame, 3, Way::V2Recorder, 0), n);
  }
}
