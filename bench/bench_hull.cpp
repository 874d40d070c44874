// bench_hull: constraint points per second through the incremental hulls
// (translate/hull_builder.h), as translate feeds them: the time-ordered merge of
// two directions of matched packets of one node pair, then the feasible-line fit.
//
//   bench_hull [POINTS (default 50000000)]
//
// Points: a clock pair 40 ppm apart, one packet every ~2 us alternating direction,
// one-way delays 20-300 us drawn at random. Prints points/s, hull sizes (memory is
// the hull, not the points) and the fit's time and bound width.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "translate/hull_builder.h"
#include "translate/hull_sync.h"

int main(int argc, char** argv) {
  using namespace cptrace;
  uint64_t n = argc > 1 ? strtoull(argv[1], nullptr, 10) : 50000000ull;
  // Points are generated into a buffer first so that only the hull is timed.
  std::vector<std::pair<Pt, bool>> pts;
  pts.reserve(n);
  std::mt19937_64 rng(1);
  const long double rate = 1 + 40e-6L, off = 5e12L;
  int64_t x = 1000000000;
  for (uint64_t i = 0; i < n; ++i) {
    x += 4000 + int64_t(rng() % 2000);
    int64_t d = 50000 + int64_t(rng() % 700000);  // 20-300 us at 2.5 ticks/ns
    int64_t y = int64_t(off + rate * (long double)x);
    bool below = i % 2;
    pts.push_back({below ? Pt{x, y - d} : Pt{x, y + d}, below});
  }
  PairHulls h;
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& [p, below] : pts) (below ? h.below : h.above).push(p);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto t1 = std::chrono::steady_clock::now();
  HullFit f = fit_hull_points(h.below.points(), h.above.points());
  double fit = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  printf("hull: %llu points in %.3f s = %.1f M points/s (one core)\n", (unsigned long long)n, secs, n / secs / 1e6);
  printf("  hull points kept: below %zu (peak %zu), above %zu (peak %zu): %zu bytes instead of %llu\n",
         h.below.points().size(), h.below.peak(), h.above.points().size(), h.above.peak(),
         (h.below.peak() + h.above.peak()) * sizeof(Pt), (unsigned long long)(n * sizeof(Pt)));
  printf("  fit: %s, %zu vertex lines in %.3f ms", to_string(f.status), f.lines.lines.size(), fit * 1e3);
  if (f.status == HullStatus::Feasible)
    printf(", bound width mid-span %lld ticks", (long long)f.lines.at(x / 2).width());
  printf("\n");
  return 0;
}
