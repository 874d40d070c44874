// bench_translate: speed of `cptrace translate` (events/s on one core) on a large
// synthetic 3-node recording, and its peak memory (to show it stays bounded).
//
//   bench_translate [TOTAL_EVENTS (default 50000000)] [DIR (default: a temp dir)] [METHODS (default ratio,hull,best)]
//
// The traces are generated frame by frame (never held in memory): three nodes with
// offsets of seconds and skews of tens to hundreds of ppm, MinRTT rounds at start
// and stop plus a stream every 500 ms, events spread evenly over 60 s. With KEEP=1
// in the environment the traces and the last output stay in DIR.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "../tests/synth_cluster.h"
#include "translate/translate.h"

int main(int argc, char** argv) {
  uint64_t total = argc > 1 ? strtoull(argv[1], nullptr, 10) : 50000000ull;
  std::string dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path() / "cptrace-bench-translate";
  std::filesystem::remove_all(dir);
  const long double span = 60e9L;
  synth::Clock a{"A", 1.0e15L, 20}, b{"B", 1.0e15L + 8.1e9L, 150}, c{"C", 1.0e15L - 4.3e9L, -80};
  synth::Cluster cl({a, b, c}, 1);
  cl.sync_all({{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}, span, 50, 500e6L);
  const uint64_t chan[3] = {cp_channel_id("A.out"), cp_channel_id("B.in"), cp_channel_id("C.in")};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> dirs;
  for (int i = 0; i < 3; ++i) {
    dirs.push_back(dir + "/" + cl.clock(i).name);
    uint64_t n = total / 3 + (i < int(total % 3));
    cl.write(i, dirs.back(), span, 16384, [&](cptrace::TraceWriter& w) {
      std::vector<cptrace::TraceEvent> ev;
      for (uint64_t k = 0; k < n; ++k) {
        cptrace::TraceEvent e;
        e.ts = cl.clock(i).read(100e6L + (span - 200e6L) * k / n);
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
  }
  double gen = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("generated %llu events on 3 nodes in %.1f s\n", (unsigned long long)total, gen);
  std::vector<std::string> methods;
  std::string list = argc > 3 ? argv[3] : "ratio,hull,best";
  for (size_t at = 0; at <= list.size();) {
    size_t comma = std::min(list.find(',', at), list.size());
    methods.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  for (const std::string& method : methods) {
    cptrace::TranslateOptions o{dirs, "A", dir + "/out", cptrace::parse_method(method), true};
    auto t1 = std::chrono::steady_clock::now();
    cptrace::TranslateSummary s = cptrace::translate(o);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    uint64_t in_bytes = 0, out_bytes = std::filesystem::file_size(dir + "/out/events.cpt");
    for (auto& d : dirs) in_bytes += std::filesystem::file_size(d + "/events.cpt");
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    printf(
        "translate --method %-5s %llu events in %.2f s = %.2f M events/s (one thread); input %.1f MB, output "
        "%.1f MB (%.2f bytes/event); peak RSS so far %.1f MB\n",
        method.c_str(), (unsigned long long)s.events, secs, s.events / secs / 1e6, in_bytes / 1e6, out_bytes / 1e6,
        double(out_bytes) / s.events, ru.ru_maxrss / 1024.0);
  }
  if (!getenv("KEEP")) std::filesystem::remove_all(dir);
  return 0;
}
