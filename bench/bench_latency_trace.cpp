// bench_latency_trace: a translated three-node run for `cptrace latency` at
// scale, without a recorder: A -> B -> C as the analysis budget test makes it
// (tests/integration/test_analysis_budget.cpp), N tuples over 5 s, every 97th
// never reaching C.in, every 89th C.in id never sent, every 101st logged twice
// on A.out and every 103rd twice on C.in.
//
//   bench_latency_trace N DIR [in-order]
//
// Ids are scrambled (splitmix64) unless `in-order` (0, 1, 2, ...). Leaves the
// nodes' own traces in DIR/A, DIR/B, DIR/C (B's holds B.in and B.out: one
// node's latency) and the translated run in DIR/out.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "../tests/synth_cluster.h"
#include "translate/translate.h"

namespace {

uint64_t scramble(uint64_t x) {  // splitmix64's finalizer: a bijection
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_latency_trace N DIR [in-order]\n");
    return 2;
  }
  const uint64_t n = strtoull(argv[1], nullptr, 10);
  const std::string dir = argv[2];
  const bool in_order = argc > 3 && !strcmp(argv[3], "in-order");
  std::filesystem::remove_all(dir);
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 29);
  cl.keep_truth = false;
  cl.sync_all({{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}, 6e9L, 50, 250e6L);
  const long double period = 5.0e9L / (long double)n;
  for (uint64_t k = 0; k < n; ++k) {
    long double t = 200e6L + k * period;
    uint64_t id = in_order ? k : scramble(k);
    bool to_reaches = k % 97 != 0, from_sent = k % 89 != 0;
    if (from_sent) cl.event(0, "A.out", id, t);
    if (from_sent && k % 101 == 0) cl.event(0, "A.out", id, t + 10);
    t += cl.delay(0, 1);
    cl.event(1, "B.in", id, t);
    t += 2000;
    cl.event(1, "B.out", id, t);
    t += cl.delay(1, 2);
    if (to_reaches) cl.event(2, "C.in", id, t);
    if (to_reaches && k % 103 == 0) cl.event(2, "C.in", id, t + 10);
  }
  cptrace::TranslateOptions o;
  for (int i = 0; i < 3; ++i) {
    o.dirs.push_back(dir + "/" + cl.clock(i).name);
    cl.write(i, o.dirs.back(), 6e9L);
  }
  o.reference = "A";
  o.out = dir + "/out";
  o.overwrite = true;
  cptrace::TranslateSummary s = cptrace::translate(o);
  printf("bench_latency_trace: %llu tuples (%s ids), %llu events translated into %s\n", (unsigned long long)n,
         in_order ? "in-order" : "scrambled", (unsigned long long)s.events, o.out.c_str());
  return 0;
}
