// bench_run_view: the cost of one refresh of `cptrace top RUN` (analyze/run_view.h)
// on a synthetic 3-node run: reading the frames (once, as a live view reads each
// frame once) and the refresh itself, which rebuilds the clock relations from the
// rounds, bounds the tuples (all of them the first time; then only those whose
// relations changed where they query them) and selects the percentiles: the first
// refresh, refreshes with the relations unchanged, and one after a new round on
// every pair at the end of the run so far.
//
//   bench_run_view [EVENTS_PER_NODE (default 1000000)] [REFRESHES (default 5)]
//
// Nodes as bench_translate's: offsets of seconds, skews of tens to hundreds of ppm,
// MinRTT rounds at start plus a stream every 500 ms, events over 60 s, then one
// more round per pair (the frame appended for the last refresh);
// each node logs its own channel of the same tuples (A.out, B.in, C.in).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../tests/synth_cluster.h"
#include "analyze/run_view.h"
#include "trace/trace_format.h"

int main(int argc, char** argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1000000ull;
  int refreshes = argc > 2 ? atoi(argv[2]) : 5;
  std::string base = std::filesystem::temp_directory_path() / ("cptrace-bench-run-view-" + std::to_string(getpid()));
  std::string src = base + "/src", dir = base + "/run";
  std::filesystem::remove_all(base);
  const long double span = 60e9L;
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 1);
  const std::vector<std::pair<int, int>> all = {{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}};
  synth::Cluster late({a, b, c}, 2);  // the new round: same clocks, after every other
  for (auto [i, j] : all) {
    cl.rounds(i, j, "start", 1e6L, 50, 500000);
    for (long double t = 40e6L; t < span - 500e6L; t += 500e6L) cl.rounds(i, j, "stream", t, 1, 0);
    late.rounds(i, j, "stream", span - 50e6L, 1, 0);
  }
  const uint64_t chan[3] = {cp_channel_id("A.out"), cp_channel_id("B.in"), cp_channel_id("C.in")};
  for (int i = 0; i < 3; ++i)
    cl.write(i, src + "/" + cl.clock(i).name, span, 16384, [&](cptrace::TraceWriter& w) {
      std::vector<cptrace::TraceEvent> ev;
      for (uint64_t k = 0; k < n; ++k) {
        cptrace::TraceEvent e;
        // C sees each tuple 50-150 us after A (B in between).
        e.ts = cl.clock(i).read(100e6L + (span - 200e6L) * k / n + i * (25e3L + (k % 1000) * 50));
        e.channel = chan[i];
        e.tuple = k;
        e.pid = e.tid = 100 + i;
        e.cpu = uint16_t(k % 4);
        e.kind = 1;
        ev.push_back(e);
        if (ev.size() == 16384 || k + 1 == n) {
          w.write(cptrace::encode_events(ev.data(), ev.size()));
          ev.clear();
        }
      }
      const auto& r = late.rounds_of(i);
      w.write(cptrace::encode_json(cptrace::FrameType::Sync, cptrace::sync_frame_json(r), uint32_t(r.size())));
    });
  // The run directory holds every frame but the last (the new round) until the last refresh.
  std::vector<std::string> files(3);
  std::vector<uint64_t> last_frame(3);
  for (int i = 0; i < 3; ++i) {
    const std::string name = cl.clock(i).name;
    std::ifstream in(src + "/" + name + "/events.cpt", std::ios::binary);
    files[i].assign(std::istreambuf_iterator<char>(in), {});
    for (uint64_t at = cptrace::kFileHeaderSize; at + sizeof(cptrace::FrameHeader) <= files[i].size();) {
      cptrace::FrameHeader h;
      memcpy(&h, files[i].data() + at, sizeof h);
      last_frame[i] = at;
      at += sizeof h + h.payload_len;
    }
    std::filesystem::create_directories(dir + "/" + name);
    std::ofstream(dir + "/" + name + "/events.cpt", std::ios::binary) << files[i].substr(0, last_frame[i]);
  }
  cptrace::RunViewOptions o;
  o.pairs = {{"A.out", "C.in"}, {"A.out", "B.in"}};
  o.reference = "A";
  cptrace::RunView view(dir, o);
  auto t0 = std::chrono::steady_clock::now();
  view.poll();
  double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("run view: read %llu events of 3 nodes in %.2f s (%.2f M events/s)\n", (unsigned long long)(3 * n), read_s,
         3 * n / read_s / 1e6);
  // The first refresh bounds every tuple (as after a new round); the next ones
  // find the same relations and only select the percentiles again.
  auto t1 = std::chrono::steady_clock::now();
  nlohmann::json s = view.snapshot();
  double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::vector<double> times;
  for (int r = 0; r < refreshes; ++r) {
    auto t2 = std::chrono::steady_clock::now();
    s = view.snapshot();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count());
  }
  std::sort(times.begin(), times.end());
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);  // one view (the check below adds a second)
  const uint64_t all_bounded = s["pairs"][0]["count"].get<uint64_t>() + s["pairs"][1]["count"].get<uint64_t>();
  for (int i = 0; i < 3; ++i)
    std::ofstream(dir + "/" + cl.clock(i).name + "/events.cpt", std::ios::binary | std::ios::app)
        << files[i].substr(last_frame[i]);
  view.poll();
  auto t3 = std::chrono::steady_clock::now();
  s = view.snapshot();
  double after_round = std::chrono::duration<double>(std::chrono::steady_clock::now() - t3).count();
  uint64_t again = view.last_bounded();
  cptrace::RunView fresh(dir, o);  // the full recomputation gives the same
  fresh.poll();
  if (fresh.snapshot()["pairs"] != s["pairs"]) {
    fprintf(stderr, "bench_run_view: the refresh after the new round differs from a full recomputation\n");
    return 1;
  }
  printf(
      "run view: refresh with 2 pairs x %llu matched tuples: %.3f s bounding every tuple (relations changed), "
      "median %.3f s (min %.3f s, %d refreshes) with the relations unchanged; peak RSS %.0f MB\n",
      (unsigned long long)s["pairs"][0]["count"].get<uint64_t>(), full, times[times.size() / 2], times[0], refreshes,
      ru.ru_maxrss / 1024.0);
  printf(
      "run view: refresh after a new round on every pair: %.3f s, %llu of %llu tuples bounded again (identical to a "
      "full recomputation)\n",
      after_round, (unsigned long long)again, (unsigned long long)all_bounded);
  printf("run view: A.out -> C.in p50 %lld [%lld, %lld] ticks\n",
         (long long)s["pairs"][0]["p50"]["ticks"].get<int64_t>(),
         (long long)s["pairs"][0]["p50"]["ticks_lo"].get<int64_t>(),
         (long long)s["pairs"][0]["p50"]["ticks_hi"].get<int64_t>());
  std::filesystem::remove_all(base);
  return 0;
}
