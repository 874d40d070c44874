// The namespace testbed's own latency on this machine: for each configured one-way
// delay, UDP echo probes from node 1 to node 2 and back, one at a time; prints, per
// direction, how much the measured one-way time exceeds the configured delay (the
// stacks and the forwarder: its floor and its spread), and the forwarder's own
// transmit lateness. The testbed tests compare paths probed in the same rounds rather
// than assert these figures; they are here to be looked at.
//
// Usage (root, from the repository): bench_testbed [PROBES] [DELAY_US ...]
//   default: 300 probes at delays 0 200 300 500
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

std::string sh(const std::string& cmd) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// A UDP socket created inside network namespace `ns`.
int udp_in(const std::string& ns) {
  int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  int fd = -1;
  if (self >= 0 && target >= 0 && setns(target, CLONE_NEWNET) == 0) {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (setns(self, CLONE_NEWNET) != 0) abort();
  }
  if (self >= 0) close(self);
  if (target >= 0) close(target);
  if (fd >= 0) {
    timeval tv{0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  return fd;
}

struct Probe {
  uint64_t seq;
  int64_t t_send, t_server;
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[size_t(p * double(v.size() - 1) + 0.5)];
}

std::string stat_of(const std::string& status, const std::string& key) {
  auto pos = status.find(key + "=");
  if (pos == std::string::npos) return "?";
  auto end = status.find('\n', pos);
  return status.substr(pos + key.size() + 1, end - pos - key.size() - 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    printf("   skipped: needs root (network namespaces)\n");
    return 0;
  }
  int probes = argc > 1 ? atoi(argv[1]) : 300;
  std::vector<int> delays;
  for (int i = 2; i < argc; ++i) delays.push_back(atoi(argv[i]));
  if (delays.empty()) delays = {0, 200, 300, 500};
  const std::string prefix = "cpbtb", tb = "bash tools/testbed.sh ";
  printf("   %6s | %-32s | %-32s | %s\n", "delay", "to node 2: excess us min p10 p50 p99",
         "back: excess us min p10 p50 p99", "forwarder late us p50 p99 max");
  for (int d : delays) {
    std::string up = sh(tb + "up 2 --prefix " + prefix + " --delay " + std::to_string(d));
    if (up.find("error") != std::string::npos || up.find("failed") != std::string::npos) {
      printf("   testbed up failed:\n%s\n", up.c_str());
      return 1;
    }
    int srv = udp_in(prefix + "2"), cli = udp_in(prefix + "1");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(7900);
    inet_pton(AF_INET, "10.77.2.2", &a.sin_addr);
    if (srv < 0 || cli < 0 || bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      printf("   sockets in the testbed failed\n");
      sh(tb + "down --prefix " + prefix);
      return 1;
    }
    std::atomic<bool> stop{false};
    std::thread echo([&] {
      while (!stop) {
        Probe p;
        sockaddr_in from{};
        socklen_t fl = sizeof from;
        if (recvfrom(srv, &p, sizeof p, 0, reinterpret_cast<sockaddr*>(&from), &fl) != ssize_t(sizeof p)) continue;
        p.t_server = mono_ns();
        sendto(srv, &p, sizeof p, 0, reinterpret_cast<sockaddr*>(&from), fl);
      }
    });
    std::vector<double> fwd, back;
    for (int i = 0; i < probes; ++i) {
      Probe p{uint64_t(i), mono_ns(), 0};
      sendto(cli, &p, sizeof p, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
      Probe q;
      while (recv(cli, &q, sizeof q, 0) == ssize_t(sizeof q)) {
        if (q.seq != uint64_t(i)) continue;
        int64_t t = mono_ns();
        fwd.push_back(double(q.t_server - q.t_send) / 1e3 - d);
        back.push_back(double(t - q.t_server) / 1e3 - d);
        break;
      }
      usleep(500);
    }
    stop = true;
    echo.join();
    close(srv);
    close(cli);
    std::string st = sh(tb + "status --prefix " + prefix);
    printf("   %6d | %7.1f %7.1f %7.1f %7.1f  | %7.1f %7.1f %7.1f %7.1f  | %s %s %s  (%zu/%d echoes)\n", d, pct(fwd, 0),
           pct(fwd, .1), pct(fwd, .5), pct(fwd, .99), pct(back, 0), pct(back, .1), pct(back, .5), pct(back, .99),
           stat_of(st, "late_us_p50").c_str(), stat_of(st, "late_us_p99").c_str(), stat_of(st, "late_us_max").c_str(),
           fwd.size(), probes);
    sh(tb + "down --prefix " + prefix);
  }
  return 0;
}
