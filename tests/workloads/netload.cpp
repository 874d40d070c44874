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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

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
    while (msgs < count) {
      ssize_t n = recv(fd, buf.data(), buf.size(), 0);
      if (n < 0) break;
      bytes += n, msgs++;
    }
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
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len)) die("connect");
  std::vector<char> msg(1 << 16);
  long bytes = 0;
  for (long i = 0; i < count; ++i) {
    size_t n = msg_size(tcp, i);
    for (size_t k = 0; k < n; ++k) msg[k] = char('a' + (i + k) % 26);
    memcpy(msg.data(), &i, sizeof i);  // distinct contents: distinct UDP payload hashes
    for (size_t off = 0; off < n;) {
      ssize_t w = send(fd, msg.data() + off, n - off, 0);
      if (w < 0) die("send");
      off += size_t(w);
    }
    bytes += long(n);
    if (!tcp) usleep(1000);  // no socket-buffer drops on the receiver
  }
  if (tcp) {
    shutdown(fd, SHUT_WR);
    char c;
    while (read(fd, &c, 1) > 0) {
    }
  }
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
