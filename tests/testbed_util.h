// The namespace testbed for tests: a guard that brings `tools/testbed.sh up N` up under a
// unique prefix and tears it down in its destructor, the loud skip when namespaces are not
// available, and small socket helpers (a socket created inside a node's namespace, address
// parsing). Shared by every multi-node test.
#pragma once
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace testbed {

inline int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline std::string dir_of(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

inline bool is_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The test binary lives in the build directory; the script in ../tools of it.
inline std::string exe_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return dir_of(buf);
}

inline std::string find_script() {
  for (const std::string& c : {exe_dir() + "/../tools/testbed.sh", exe_dir() + "/../../tools/testbed.sh",
                               std::string("../tools/testbed.sh"), std::string("tools/testbed.sh")})
    if (is_file(c)) return c;
  return "";
}

struct CmdResult {
  int status;
  std::string out;
};

// Runs a shell command (bounded by `timeout`), collecting stdout+stderr.
inline CmdResult run(const std::string& cmd, int timeout_s = 60) {
  std::string full = "timeout -k 5 " + std::to_string(timeout_s) + " " + cmd + " 2>&1";
  FILE* f = popen(full.c_str(), "r");
  if (!f) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int st = pclose(f);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

inline std::string shq(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Why these tests cannot run here, or "" when they can. Checked once.
inline const std::string& skip_reason() {
  static const std::string reason = [] {
    if (geteuid() != 0) return std::string("not root: network namespaces need CAP_SYS_ADMIN");
    if (find_script().empty()) return std::string("tools/testbed.sh not found next to the build directory");
    std::string probe = "cpttprobe" + std::to_string(getpid()) + "x";
    auto r = run("ip netns add " + probe);
    if (r.status != 0) return "`ip netns add` failed: " + r.out;
    run("ip netns del " + probe);
    return std::string();
  }();
  return reason;
}

#define REQUIRE_TESTBED()                                                                \
  do {                                                                                   \
    if (!skip_reason().empty()) {                                                        \
      fprintf(stderr, "\n*** SKIPPING testbed test: %s ***\n\n", skip_reason().c_str()); \
      GTEST_SKIP() << "testbed unavailable: " << skip_reason();                          \
    }                                                                                    \
  } while (0)

inline std::string unique_prefix(const std::string& tag) {
  // Must start with a letter and not end with a digit (see testbed.sh).
  return "cptt" + std::to_string(getpid() % 100000) + tag;
}

// RAII: `up` in the constructor, `down` in the destructor, whatever happens in between.
class Testbed {
 public:
  Testbed(const std::string& tag, int nodes, const std::string& opts) : prefix_(unique_prefix(tag)) {
    script_ = find_script();
    std::string env;
    std::string nd = exe_dir() + "/netdelay";
    if (is_file(nd)) env = "env NETDELAY=" + shq(nd) + " ";
    auto r =
        run(env + "bash " + shq(script_) + " up " + std::to_string(nodes) + " --prefix " + prefix_ + " " + opts, 120);
    ok_ = r.status == 0;
    output_ = r.out;
  }
  ~Testbed() { down(); }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  CmdResult down() { return run("bash " + shq(script_) + " down --prefix " + prefix_, 60); }
  CmdResult status() { return run("bash " + shq(script_) + " status --prefix " + prefix_, 30); }
  bool ok() const { return ok_; }
  const std::string& output() const { return output_; }
  const std::string& prefix() const { return prefix_; }
  std::string ns(int k) const { return prefix_ + std::to_string(k); }
  std::string router() const { return prefix_ + "r"; }

 private:
  std::string prefix_, script_, output_;
  bool ok_ = false;
};

// A socket created inside namespace `ns` (the calling thread switches there and back).
inline int socket_in(const std::string& ns, int domain, int type, int proto = 0) {
  int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  int target = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  int fd = -1;
  if (self >= 0 && target >= 0 && setns(target, CLONE_NEWNET) == 0) {
    fd = socket(domain, type | SOCK_CLOEXEC, proto);
    int e = errno;
    if (setns(self, CLONE_NEWNET) != 0) abort();  // never continue in the wrong namespace
    errno = e;
  }
  if (self >= 0) close(self);
  if (target >= 0) close(target);
  return fd;
}

struct Addr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family() const { return ss.ss_family; }
};
inline Addr make_addr(const std::string& ip, uint16_t port) {
  Addr a;
  if (ip.find(':') != std::string::npos) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    inet_pton(AF_INET6, ip.c_str(), &s6->sin6_addr);
    a.len = sizeof *s6;
  } else {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&a.ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    inet_pton(AF_INET, ip.c_str(), &s4->sin_addr);
    a.len = sizeof *s4;
  }
  return a;
}

inline void set_timeout(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace testbed
