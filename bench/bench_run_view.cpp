// bench_run_view: the cost of one refresh of `cptrace top RUN` (analyze/run_view.h)
// on a synthetic 3-node run: reading the frames (once, as a live view reads each
// frame once) and the refresh itself, which rebuilds the clock relations from the
// rounds and recomputes every matched tuple's bound and the percentiles.
//
//   bench_run_view [EVENTS_PER_NODE (default 1000000)] [REFRESHES (default 5)]
//
// Nodes as bench_translate's: offsets of seconds, skews of tens to hundreds of ppm,
// MinRTT rounds at start and stop plus a stream every 500 ms, events over 60 s;
// each node logs its own channel of the same tuples (A.out, B.in, C.in).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "../tests/synth_cluster.h"
#include "analyze/run_view.h"

int main(int argc, char** argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1000000ull;
  int refreshes = argc > 2 ? atoi(argv[2]) : 5;
  std::string dir = std::filesystem::temp_directory_path() / ("cptrace-bench-run-view-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const long double span = 60e9L;
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 1);
  cl.sync_all({{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}, span, 50, 500e6L);
  const uint64_t chan[3] = {cp_channel_id("A.out"), cp_channel_id("B.in"), cp_channel_id("C.in")};
  for (int i = 0; i < 3; ++i)
    cl.write(i, dir + "/" + cl.clock(i).name, span, 16384, [&](cptrace::TraceWriter& w) {
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
    });
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
  getrusage(RUSAGE_SELF, &ru);
  printf(
      "run view: refresh with 2 pairs x %llu matched tuples: %.3f s bounding every tuple (relations changed), "
      "median %.3f s (min %.3f s, %d refreshes) with the relations unchanged; peak RSS %.0f MB\n",
      (unsigned long long)s["pairs"][0]["count"].get<uint64_t>(), full, times[times.size() / 2], times[0], refreshes,
      ru.ru_maxrss / 1024.0);
  printf("run view: A.out -> C.in p50 %lld [%lld, %lld] ticks\n",
         (long long)s["pairs"][0]["p50"]["ticks"].get<int64_t>(),
         (long long)s["pairs"][0]["p50"]["ticks_lo"].get<int64_t>(),
         (long long)s["pairs"][0]["p50"]["ticks_hi"].get<int64_t>());
  std::filesystem::remove_all(dir);
  return 0;
}
