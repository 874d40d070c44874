// bench_translate_cluster: `cptrace translate` of a cluster run, as `cluster
// record` leaves it: N synthetic nodes (default 64) whose MinRTT rounds follow
// the O(N) topology (node i with the reference 0 and its neighbour i - 1, start
// and stop), 8 pipeline chains across them, events spread over 60 s.
//
//   bench_translate_cluster [NODES (default 64)] [TUPLES_PER_CHAIN (default 2000)] [DIR (default: a temp dir)]
//
// Prints nodes, pairs, events, the seconds of translate (in process, the code of
// the command) and events/s, then checks one chain's end-to-end truth is inside
// every bound (a figure, not a verdict: the tests assert it).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "../tests/synth_cluster.h"
#include "latency/latency.h"
#include "translate/translate.h"

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? atoi(argv[1]) : 64;
  const uint64_t tuples = argc > 2 ? strtoull(argv[2], nullptr, 10) : 2000;
  std::string dir = argc > 3 ? argv[3] : std::filesystem::temp_directory_path() / "cptrace-bench-translate-cluster";
  std::filesystem::remove_all(dir);
  const long double span = 60e9L;
  std::vector<synth::Clock> clocks;
  for (int i = 0; i < nodes; ++i)  // offsets of seconds, rates within +-200 ppm
    clocks.push_back({"N" + std::to_string(i + 1), 1.0e15L + ((i * 7919) % 5000 - 2500) * 2.5e6L,
                      (long double)((i * 37) % 401 - 200)});
  synth::Cluster cl(clocks, 1);
  std::vector<std::pair<int, int>> pairs;
  for (int i = 1; i < nodes; ++i) {
    pairs.push_back({i, 0});
    if (i > 1) pairs.push_back({i, i - 1});
  }
  cl.sync_all(pairs, span, 10);
  // Chains of (up to) 8 consecutive nodes: the first sends, the others pass on.
  const int chain_len = std::min(8, nodes);
  const int chains = nodes / chain_len;
  const long double period = (span - 2e9L) / tuples;
  for (int c = 0; c < chains; ++c)
    for (uint64_t k = 0; k < tuples; ++k) {
      long double t = 1e9L + k * period + c * 1e5L;
      for (int s = 0; s < chain_len; ++s) {
        int n = c * chain_len + s;
        if (s > 0) cl.event(n, clocks[n].name + ".in", k, t += cl.delay(n - 1, n));
        if (s + 1 < chain_len) cl.event(n, clocks[n].name + ".out", k, t += 20000);
      }
    }
  std::vector<std::string> dirs;
  uint64_t events = 0;
  for (int i = 0; i < nodes; ++i) {
    dirs.push_back(dir + "/" + clocks[i].name);
    cl.write(i, dirs.back(), span);
    events += cl.events(i).size();
  }
  cptrace::TranslateOptions o;
  o.dirs = dirs;
  o.reference = clocks[0].name;
  o.out = dir + "/out";
  o.overwrite = true;
  auto t0 = std::chrono::steady_clock::now();
  cptrace::TranslateSummary s = cptrace::translate(o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  printf(
      "translate: %d nodes, %zu MinRTT pairs (all pairs: %d), %llu events in %.3f s = %.2f M events/s; peak RSS "
      "%.1f MB\n",
      nodes, pairs.size(), nodes * (nodes - 1) / 2, (unsigned long long)s.events, secs, s.events / secs / 1e6,
      ru.ru_maxrss / 1024.0);
  if (chains > 0) {  // the last chain: its path crosses the most pairs
    int a = (chains - 1) * chain_len, b = a + chain_len - 1;
    std::string c1 = clocks[a].name + ".out", c2 = clocks[b].name + ".in";
    cptrace::LatencyResult r = cptrace::latency(o.out, c1, c2);
    size_t in = 0;
    int64_t widest = 0;
    for (const cptrace::LatencyRow& row : r.rows) {
      long double ns = cl.truth_ns(c1, c2, row.tuple);
      in += ns >= row.ns_lo && ns <= row.ns_hi;
      widest = std::max(widest, row.ns_hi - row.ns_lo);
    }
    printf("  %s -> %s: %zu/%zu bounds contain the truth, widest %lld ns\n", c1.c_str(), c2.c_str(), in, r.rows.size(),
           (long long)widest);
  }
  if (!getenv("KEEP")) std::filesystem::remove_all(dir);
  return 0;
}
