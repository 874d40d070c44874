// Network workload for the --net tests: a TCP/UDP server and client exchanging
// messages of known, deterministic sizes and contents.
//
//   netload server tcp|udp ADDR PORT [COUNT [DELAY_MS]]   prints "ready", then (tcp)
//       accepts one connection, waits DELAY_MS (so the client's data and FIN queue
//       up unread) and reads until EOF, or (udp) reads COUNT datagrams (or until
//       DELAY_MS, default 3 s, without one); prints "received BYTES MESSAGES" and exits.
//   netload client tcp|udp ADDR PORT COUNT [GO_FILE]   prints "pid PID"; waits for
//       GO_FILE to exist when given; sends COUNT messages, message i of
//       msg_size(proto, i) bytes; prints "sent BYTES LOCAL_PORT". The tcp client
//       shuts down its write side and waits for the server's close before exiting,
//       so every segment is acknowledged; both then linger 300 ms.
//   With NETLOAD_STAMPS=FILE (udp), each side writes one line per datagram to
//   FILE: "INDEX BEFORE AFTER", CLOCK_MONOTONIC ns around the send or receive
//   call that moved datagram INDEX (the index the client wrote into its first
//   8 bytes): the truth of which call moved which datagram, for the tests.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

size_t msg_size(bool tcp, long i) { return tcp ? 100 + (i * 7919) % 3000 : 40 + (i * 7919) % 1200; }

sockaddr_storage addr_of(const char* ip, int port, socklen_t& len) {
  sockaddr_storage ss{};
  if (strchr(ip, ':')) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    inet_pton(AF_INET6, ip, &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    inet_pton(AF_INET, ip, &a->sin_addr);
    len = sizeof *a;
  }
  return ss;
}

uint64_t mono_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

// NETLOAD_STAMPS: where to log each datagram's call (nullptr: nowhere).
FILE* stamps_file() {
  const char* path = getenv("NETLOAD_STAMPS");
  return path ? fopen(path, "w") : nullptr;
}

[[noreturn]] void die(const char* what) {
  perror(what);
  exit(1);
}

int local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t l = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &l);
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

int server(bool tcp, const char* ip, int port, long count, long delay_ms) {
  socklen_t len;
  sockaddr_storage ss = addr_of(ip, port, len);
  int fd = socket(ss.ss_family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len)) die("bind");
  if (tcp && listen(fd, 4)) die("listen");
  printf("ready\n");
  fflush(stdout);
  std::vector<char> buf(1 << 16);
  long bytes = 0, msgs = 0;
  if (tcp) {
    int c = accept(fd, nullptr, nullptr);
    if (c < 0) die("accept");
    if (delay_ms > 0) usleep(useconds_t(delay_ms * 1000));
    ssize_t n;
    while ((n = read(c, buf.data(), buf.size())) > 0) bytes += n, msgs++;
    close(c);
  } else {
    timeval tv{delay_ms > 0 ? delay_ms / 1000 : 3, delay_ms > 0 ? (delay_ms % 1000) * 1000 : 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    FILE* log = stamps_file();
    while (msgs < count) {
      const uint64_t before = mono_ns();
      // IPv6 through recvmsg into two buffers (the datagram's first bytes span
      // both), IPv4 through recv: the recorder finds a message in either.
      iovec iov[2] = {{buf.data(), 16}, {buf.data() + 16, buf.size() - 16}};
      msghdr mh{};
      mh.msg_iov = iov, mh.msg_iovlen = 2;
      ssize_t n = ss.ss_family == AF_INET6 ? recvmsg(fd, &mh, 0) : recv(fd, buf.data(), buf.size(), 0);
      const uint64_t after = mono_ns();
      if (n < 0) break;
      long index = -1;
      if (n >= long(sizeof index)) memcpy(&index, buf.data(), sizeof index);
      if (log) fprintf(log, "%ld %llu %llu\n", index, (unsigned long long)before, (unsigned long long)after);
      bytes += n, msgs++;
    }
    if (log) fclose(log);
  }
  printf("received %ld %ld\n", bytes, msgs);
  fflush(stdout);
  usleep(300000);
  return 0;
}

int client(bool tcp, const char* ip, int port, long count, const char* go) {
  printf("pid %d\n", getpid());
  fflush(stdout);
  struct stat st;
  while (go && stat(go, &st) != 0) usleep(10000);
  socklen_t len;
  sockaddr_storage ss = addr_of(ip, port, len);
  int fd = socket(ss.ss_family, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
  // IPv6 UDP unconnected, each datagram named by sendmsg in two buffers (the
  // destination in the call, not the socket); the rest connected.
  const bool named = !tcp && ss.ss_family == AF_INET6;
  if (!named && connect(fd, reinterpret_cast<sockaddr*>(&ss), len)) die("connect");
  std::vector<char> msg(1 << 16);
  FILE* log = tcp ? nullptr : stamps_file();
  long bytes = 0;
  for (long i = 0; i < count; ++i) {
    size_t n = msg_size(tcp, i);
    for (size_t k = 0; k < n; ++k) msg[k] = char('a' + (i + k) % 26);
    memcpy(msg.data(), &i, sizeof i);  // distinct contents: distinct UDP payload hashes
    if (named) {
      iovec iov[2] = {{msg.data(), 8}, {msg.data() + 8, n - 8}};
      msghdr mh{};
      mh.msg_name = &ss, mh.msg_namelen = len, mh.msg_iov = iov, mh.msg_iovlen = 2;
      const uint64_t before = mono_ns();
      if (sendmsg(fd, &mh, 0) != ssize_t(n)) die("sendmsg");
      if (log) fprintf(log, "%ld %llu %llu\n", i, (unsigned long long)before, (unsigned long long)mono_ns());
      bytes += long(n);
      usleep(1000);
      continue;
    }
    const uint64_t before = mono_ns();
    for (size_t off = 0; off < n;) {
      ssize_t w = send(fd, msg.data() + off, n - off, 0);
      if (w < 0) die("send");
      off += size_t(w);
    }
    if (log) fprintf(log, "%ld %llu %llu\n", i, (unsigned long long)before, (unsigned long long)mono_ns());
    bytes += long(n);
    if (!tcp) usleep(1000);  // no socket-buffer drops on the receiver
  }
  if (tcp) {
    shutdown(fd, SHUT_WR);
    char c;
    while (read(fd, &c, 1) > 0) {
    }
  }
  if (log) fclose(log);
  printf("sent %ld %d\n", bytes, local_port(fd));
  fflush(stdout);
  close(fd);
  usleep(300000);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: netload server|client tcp|udp ADDR PORT [COUNT] [GO_FILE]\n");
    return 2;
  }
  std::string role = argv[1];
  bool tcp = std::string(argv[2]) == "tcp";
  int port = atoi(argv[4]);
  long count = argc > 5 ? atol(argv[5]) : 0;
  if (role == "server") return server(tcp, argv[3], port, count, argc > 6 ? atol(argv[6]) : 0);
  return client(tcp, argv[3], port, count, argc > 6 ? argv[6] : nullptr);
}
