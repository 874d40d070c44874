// MinRTT figures on a plain veth pair (and through a Linux bridge): kernel vs
// user-space minimum RTT (median over runs, ratio), rounds per second, and after
// how many rounds the minimum settles. Needs root (network namespaces). Prints
// figures only.
//
//   bench_minrtt [--runs N] [--rounds R] [--gap-ms G] [--bridge]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "trace/trace_reader.h"

namespace fs = std::filesystem;
using namespace cptrace;

namespace {

int sh(const std::string& c) { return system((c + " >/dev/null 2>&1").c_str()); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// First round after which the running minimum stays within `tol` of the final one.
size_t settle(const std::vector<int64_t>& r, double tol) {
  int64_t fin = *std::min_element(r.begin(), r.end()), run = INT64_MAX;
  for (size_t i = 0; i < r.size(); ++i) {
    run = std::min(run, r[i]);
    if (double(run) <= double(fin) * (1 + tol)) return i + 1;
  }
  return r.size();
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, rounds = 1000;
  double gap_ms = 0.2;
  bool bridge = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (a == "--gap-ms" && i + 1 < argc)
      gap_ms = atof(argv[++i]);
    else if (a == "--bridge")
      bridge = true;
    else {
      fprintf(stderr, "usage: bench_minrtt [--runs N] [--rounds R] [--gap-ms G] [--bridge]\n");
      return 2;
    }
  }
  if (geteuid() != 0) {
    fprintf(stderr, "bench_minrtt: needs root (network namespaces); skipped\n");
    return 0;
  }
  fs::path bin = fs::canonical("/proc/self/exe").parent_path().parent_path() / "cptrace";
  std::string p = "cpbm" + std::to_string(getpid() % 100000);
  std::string A = p + "a", B = p + "b";
  auto down = [&] {
    sh("ip netns del " + A);
    sh("ip netns del " + B);
    sh("ip netns del " + p + "br");
  };
  down();
  bool ok = sh("ip netns add " + A) == 0 && sh("ip netns add " + B) == 0;
  if (bridge) {
    ok = ok && sh("ip netns add " + p + "br") == 0 && sh("ip -n " + p + "br link add br0 type bridge") == 0 &&
         sh("ip link add eth0 netns " + A + " type veth peer name pa netns " + p + "br") == 0 &&
         sh("ip link add eth0 netns " + B + " type veth peer name pb netns " + p + "br") == 0 &&
         sh("ip -n " + p + "br link set pa master br0 up") == 0 &&
         sh("ip -n " + p + "br link set pb master br0 up") == 0 && sh("ip -n " + p + "br link set br0 up") == 0;
  } else {
    ok = ok && sh("ip link add eth0 netns " + A + " type veth peer name eth0 netns " + B) == 0;
  }
  ok = ok && sh("ip -n " + A + " addr add 10.78.0.1/24 dev eth0") == 0 &&
       sh("ip -n " + B + " addr add 10.78.0.2/24 dev eth0") == 0 && sh("ip -n " + A + " link set eth0 up") == 0 &&
       sh("ip -n " + B + " link set eth0 up") == 0 && sh("ip -n " + A + " link set lo up") == 0 &&
       sh("ip -n " + B + " link set lo up") == 0;
  if (!ok) {
    fprintf(stderr, "bench_minrtt: could not build the namespaces; skipped\n");
    down();
    return 0;
  }
  std::string tmp = "/tmp/" + p;
  fs::create_directories(tmp);
  std::string d = "ip netns exec " + B + " " + bin.string() +
                  " minrttd --insecure --allow 10.78.0.1 --listen 10.78.0.2:7711 --node b --stats-interval 0 >" + tmp +
                  "/d.out 2>&1 & echo $! > " + tmp + "/d.pid";
  system(d.c_str());
  usleep(300000);
  std::vector<double> kmin, umin, ratio, rps, settle_k, settle_u, okfrac;
  for (int r = 0; r < runs; ++r) {
    std::string out = tmp + "/run" + std::to_string(r);
    std::string c = "ip netns exec " + A + " " + bin.string() +
                    " sync --insecure --node a --peers 10.78.0.2:7711 --sync-rounds " + std::to_string(rounds) +
                    " --gap-ms " + std::to_string(gap_ms) + " -f -o " + out;
    if (sh(c) != 0) {
      fprintf(stderr, "run %d: sync failed\n", r);
      continue;
    }
    TraceReader tr(out);
    double hz = tr.clock_map().tsc_hz();
    std::vector<int64_t> kr, ur;
    for (auto& s : tr.sync_rounds()) {
      if (s.kernel_ok) kr.push_back(s.kernel_rtt());
      if (s.user_ok) ur.push_back(s.user_rtt());
    }
    if (kr.empty() || ur.empty()) continue;
    const auto& rs = tr.sync_rounds();
    double span = double(rs.back().u4 - rs.front().u1) / hz;
    double k = *std::min_element(kr.begin(), kr.end()) * 1e6 / hz,
           u = *std::min_element(ur.begin(), ur.end()) * 1e6 / hz;
    kmin.push_back(k), umin.push_back(u), ratio.push_back(u / k), rps.push_back(rs.size() / span);
    settle_k.push_back(settle(kr, 0.10)), settle_u.push_back(settle(ur, 0.10));
    okfrac.push_back(double(kr.size()) / rs.size());
    printf(
        "run %d: kernel min %.3f us, user min %.3f us, ratio %.1f, %.0f rounds/s, kernel min within 10%% after %zu "
        "rounds (user %zu), kernel_ok %zu/%zu\n",
        r, k, u, u / k, rs.size() / span, settle(kr, 0.10), settle(ur, 0.10), kr.size(), rs.size());
  }
  printf(
      "%s, %d runs x %d rounds, gap %.2f ms: median kernel MinRTT %.3f us, user-space MinRTT %.3f us, ratio %.1f; "
      "%.0f rounds/s; min within 10%% after %.0f rounds (kernel) / %.0f (user)\n",
      bridge ? "veth through a bridge" : "plain veth pair", runs, rounds, gap_ms, median(kmin), median(umin),
      median(ratio), median(rps), median(settle_k), median(settle_u));
  system(("kill $(cat " + tmp + "/d.pid) 2>/dev/null").c_str());
  usleep(200000);
  down();
  fs::remove_all(tmp);
  return 0;
}
