// Cost of one uprobe hit on this kernel, all in the same run: nothing attached,
// an empty BPF program on a nop5 site (the floor of the single path), the real
// cp_logTS recording program on a nop5 site, and an empty program on a site the
// kernel must single-step. Prints figures; never passes or fails.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe/probe_selftest.h"

int main(int argc, char** argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 50000;  // x 48 B records must fit the 8 MiB selftest ring
  int reps = argc > 2 ? atoi(argv[2]) : 15;
  std::vector<double> none, empty, rec, int3, ratio, inter;
  for (int i = 0; i < reps; ++i) {
    auto c = cptrace::measure_uprobe_cost(calls);
    if (!c.error.empty()) {
      fprintf(stderr, "bench_uprobe: %s\n", c.error.c_str());
      return 1;
    }
    none.push_back(c.no_probe_ns);
    empty.push_back(c.nop5_empty_ns);
    rec.push_back(c.nop5_record_ns);
    int3.push_back(c.int3_empty_ns);
    ratio.push_back(c.nop5_record_ns / c.nop5_empty_ns);  // a pair measured back to back
    inter.push_back(c.interleaved_ratio);
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  printf("uprobe cost, median of %d runs x %d calls:\n", reps, calls);
  printf("  no probe attached            %8.1f ns/call\n", med(none));
  printf("  empty BPF on nop5 (floor)    %8.1f ns/call\n", med(empty));
  printf("  cp_logTS recording on nop5   %8.1f ns/call   (%.2fx the empty nop5 uprobe)\n", med(rec),
         med(rec) / med(empty));
  printf("  empty BPF on int3 site       %8.1f ns/call   (%.1fx the nop5 path)\n", med(int3), med(int3) / med(empty));
  // The host's noise (other guests, steal time) moves single runs by +-20%:
  // the ratio of each back-to-back pair and of the fastest runs are steadier.
  printf("  cp_logTS / empty: median of the %d per-run ratios %.3fx, fastest runs %.3fx (%.1f / %.1f ns)\n", reps,
         med(ratio), *std::min_element(rec.begin(), rec.end()) / *std::min_element(empty.begin(), empty.end()),
         *std::min_element(rec.begin(), rec.end()), *std::min_element(empty.begin(), empty.end()));
  std::vector<double> sorted = inter;
  std::sort(sorted.begin(), sorted.end());
  printf(
      "  cp_logTS / empty, both attached, calls alternating in chunks of 500: median %.3fx "
      "(runs %.3f..%.3f, quartiles %.3f..%.3f)\n",
      med(inter), sorted.front(), sorted.back(), sorted[sorted.size() / 4], sorted[sorted.size() * 3 / 4]);
  return 0;
}
