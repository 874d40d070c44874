// pipeline: a three-stage tuple pipeline A -> B -> C over TCP, one process per
// stage (each on its own node), logging every hop with cp_logTS so cross-node
// latencies can be measured:
//
//   A:  cp_logTS("A.out", k), send k to B                        (--connect B)
//   B:  receive k, cp_logTS("B.in", k), cp_logTS("B.out", k), send k to C
//                                                   (--listen, --connect C)
//   C:  receive k, cp_logTS("C.in", k)                           (--listen)
//
//   pipeline --role A|B|C [--listen HOST:PORT] [--connect HOST:PORT]
//            [--tuples N] [--rate PER_S] [--connect-timeout S] [--echo]
//            [--batch] [--truth FILE] [--stage NAME]
//
// --stage NAME names the stage's channels NAME.in / NAME.out instead of the role
// letter's, so a path of many B stages (cluster tests: N1 -> N2 -> ... -> N8)
// has one channel pair per node.
// --batch logs every hop a second time through cp_logTS_batch, on the channel
// named as the hop plus ".b" (e.g. "A.out.b"), right after the cp_logTS call.
// --truth FILE brackets every logging call with physical TSC reads (lfence; rdtsc
// before, lfence; rdtsc; lfence after) and writes them to FILE at the end as
// TruthBracket records (tests/truth_bracket.h): whatever clock the recorder stamps
// with, the call happened inside its bracket, so tests know the truth without
// trusting CLOCK_MONOTONIC (which an NTP client slews).
//
// --echo (A and B only, no C): B sends every tuple back to A on the same
// connection after logging it, and A logs it again on arrival ("A.in"), so data
// flows both ways between two nodes.
//
// A sends --tuples tuples (ids 0..N-1) at --rate per second, then closes; B and C
// stop at end of stream. Listeners print "READY" once listening. Each stage ends
// with one JSON line: {"role":"B","tuples":N}. Exit 0, 2 on bad usage, 1 on a
// network error.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <x86intrin.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cptrace.h"
#include "../truth_bracket.h"

namespace {

struct Options {
  char role = 0;
  std::string listen, connect;
  uint64_t tuples = 1000;
  double rate = 1000;
  double connect_timeout = 20;
  bool echo = false;
  bool batch = false;
  std::string truth;
  std::string stage;  // channel prefix; empty: the role letter
};

std::string prefix(const Options& o) { return o.stage.empty() ? std::string(1, o.role) : o.stage; }

[[noreturn]] void usage(const char* why) {
  fprintf(stderr,
          "pipeline: %s\nusage: pipeline --role A|B|C [--listen HOST:PORT] [--connect HOST:PORT] "
          "[--tuples N] [--rate PER_S] [--connect-timeout S] [--echo]\n",
          why);
  exit(2);
}

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "pipeline: %s: %s\n", what.c_str(), strerror(errno));
  exit(1);
}

// The hop logger: cp_logTS, and with --batch cp_logTS_batch too, each bracketed
// when --truth is on. The brackets of every thread go into one list (the lock is
// taken outside the bracket).
class Hops {
 public:
  static void configure(const Options& o) { batch_ = o.batch, truth_ = !o.truth.empty(); }
  struct Channel {
    uint64_t single, batched;
  };
  static Channel open(const std::string& name) {
    return {cp_open_channel(name.c_str()), batch_ ? cp_open_channel((name + ".b").c_str()) : 0};
  }
  static void log(const Channel& c, uint64_t k) {
    uint64_t t0 = (_mm_lfence(), __rdtsc());
    cp_logTS(c.single, k);
    uint64_t t1 = (_mm_lfence(), __rdtsc());  // not rdtscp: some VMs' CPUs fault on it
    _mm_lfence();
    uint64_t t2 = 0, t3 = 0;
    if (batch_) {
      t2 = (_mm_lfence(), __rdtsc());
      cp_logTS_batch(c.batched, k);
      t3 = (_mm_lfence(), __rdtsc());
      _mm_lfence();
    }
    if (!truth_) return;
    std::lock_guard<std::mutex> l(mu_);
    list_.push_back({c.single, k, t0, t1});
    if (batch_) list_.push_back({c.batched, k, t2, t3});
  }
  static void write(const std::string& path) {
    if (path.empty()) return;
    std::lock_guard<std::mutex> l(mu_);
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || fwrite(list_.data(), sizeof(TruthBracket), list_.size(), f) != list_.size() || fclose(f) != 0)
      die("write --truth " + path);
  }

 private:
  static inline bool batch_ = false, truth_ = false;
  static inline std::mutex mu_;
  static inline std::vector<TruthBracket> list_;
};

sockaddr_storage parse(const std::string& hp, socklen_t& len) {
  auto colon = hp.rfind(':');
  if (colon == std::string::npos) usage(("bad address " + hp).c_str());
  std::string host = hp.substr(0, colon), port = hp.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) usage(("cannot resolve " + hp).c_str());
  sockaddr_storage ss{};
  memcpy(&ss, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  freeaddrinfo(res);
  return ss;
}

void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int accept_one(const std::string& where) {
  socklen_t len;
  sockaddr_storage ss = parse(where, len);
  int l = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(l, 1) != 0) die("listen on " + where);
  printf("READY\n");
  fflush(stdout);
  int fd = accept(l, nullptr, nullptr);
  if (fd < 0) die("accept");
  close(l);
  nodelay(fd);
  return fd;
}

// The next stage may not listen yet: retry until the timeout.
int connect_to(const std::string& where, double timeout_s) {
  socklen_t len;
  sockaddr_storage ss = parse(where, len);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
      nodelay(fd);
      return fd;
    }
    close(fd);
    if (std::chrono::steady_clock::now() > end) die("connect to " + where);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool read_id(int fd, uint64_t& k) {
  char* p = reinterpret_cast<char*>(&k);
  size_t got = 0;
  while (got < sizeof k) {
    ssize_t r = read(fd, p + got, sizeof k - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) die("read");
    if (r == 0) {
      if (got) {
        errno = EPROTO;
        die("stream ended inside a tuple id");
      }
      return false;
    }
    got += size_t(r);
  }
  return true;
}

void write_id(int fd, uint64_t k) {
  const char* p = reinterpret_cast<const char*>(&k);
  size_t put = 0;
  while (put < sizeof k) {
    ssize_t w = write(fd, p + put, sizeof k - put);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) die("write");
    put += size_t(w);
  }
}

uint64_t run_a(const Options& o) {
  Hops::Channel out = Hops::open(prefix(o) + ".out"), in = Hops::open(prefix(o) + ".in");
  int fd = connect_to(o.connect, o.connect_timeout);
  std::thread back;
  if (o.echo)
    back = std::thread([fd, in] {
      uint64_t k;
      while (read_id(fd, k)) Hops::log(in, k);
      cp_flush();
    });
  auto start = std::chrono::steady_clock::now();
  for (uint64_t k = 0; k < o.tuples; ++k) {
    std::this_thread::sleep_until(start + std::chrono::duration<double>(double(k) / o.rate));
    Hops::log(out, k);
    write_id(fd, k);
  }
  if (o.echo) {
    shutdown(fd, SHUT_WR);  // B sees the end, sends the last echoes and closes
    back.join();
  }
  close(fd);
  return o.tuples;
}

uint64_t run_b(const Options& o) {
  Hops::Channel in = Hops::open(prefix(o) + ".in"), out = Hops::open(prefix(o) + ".out");
  int next = o.echo ? -1 : connect_to(o.connect, o.connect_timeout);
  int fd = accept_one(o.listen);
  uint64_t k, n = 0;
  while (read_id(fd, k)) {
    Hops::log(in, k);
    Hops::log(out, k);
    write_id(o.echo ? fd : next, k);
    n++;
  }
  close(o.echo ? fd : next);
  return n;
}

uint64_t run_c(const Options& o) {
  Hops::Channel in = Hops::open(prefix(o) + ".in");
  int fd = accept_one(o.listen);
  uint64_t k, n = 0;
  while (read_id(fd, k)) Hops::log(in, k), n++;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--role") {
      std::string r = val();
      if (r != "A" && r != "B" && r != "C") usage("--role must be A, B or C");
      o.role = r[0];
    } else if (a == "--listen")
      o.listen = val();
    else if (a == "--connect")
      o.connect = val();
    else if (a == "--tuples")
      o.tuples = strtoull(val().c_str(), nullptr, 10);
    else if (a == "--rate")
      o.rate = atof(val().c_str());
    else if (a == "--connect-timeout")
      o.connect_timeout = atof(val().c_str());
    else if (a == "--echo")
      o.echo = true;
    else if (a == "--batch")
      o.batch = true;
    else if (a == "--truth")
      o.truth = val();
    else if (a == "--stage")
      o.stage = val();
    else
      usage(("unknown argument " + a).c_str());
  }
  if (!o.role) usage("--role is required");
  if (o.rate <= 0) usage("--rate must be positive");
  if (o.echo && o.role == 'C') usage("--echo is for A and B");
  if ((o.role == 'A' && o.connect.empty()) || (o.role == 'B' && !o.echo && o.connect.empty()) ||
      (o.role != 'A' && o.listen.empty()))
    usage("A needs --connect, B --listen and --connect (or --echo), C --listen");
  Hops::configure(o);
  uint64_t n = o.role == 'A' ? run_a(o) : o.role == 'B' ? run_b(o) : run_c(o);
  cp_flush();
  Hops::write(o.truth);
  printf("{\"role\":\"%c\",\"tuples\":%llu}\n", o.role, (unsigned long long)n);
  return 0;
}
