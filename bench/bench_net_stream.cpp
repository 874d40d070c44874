// A TCP stream over loopback in the current network namespace: one thread reads,
// one writes `size`-byte messages for `seconds`. Prints the throughput and the
// number of messages, so bench/net_capture.sh can compare it with and without
// `cptrace record --net` running. Nothing here passes or fails on a time.
//   bench_net_stream SECONDS SIZE NODELAY(0|1)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: bench_net_stream SECONDS SIZE NODELAY\n");
    return 2;
  }
  double secs = atof(argv[1]);
  size_t size = strtoul(argv[2], nullptr, 10);
  int nodelay = atoi(argv[3]);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (bind(l, (sockaddr*)&a, sizeof a) || listen(l, 1) || getsockname(l, (sockaddr*)&a, &alen)) {
    perror("listen");
    return 1;
  }
  std::atomic<long long> got{0};
  std::thread reader([&] {
    int c = accept(l, nullptr, nullptr);
    std::vector<char> buf(1 << 17);
    ssize_t n;
    while ((n = read(c, buf.data(), buf.size())) > 0) got += n;
    close(c);
  });
  int s = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);
  if (connect(s, (sockaddr*)&a, sizeof a)) {
    perror("connect");
    return 1;
  }
  std::vector<char> msg(size, 'x');
  long long msgs = 0;
  auto t0 = std::chrono::steady_clock::now();
  double el = 0;
  while (el < secs) {
    for (int i = 0; i < 64; ++i) {
      if (write(s, msg.data(), size) != (ssize_t)size) {
        perror("write");
        return 1;
      }
      ++msgs;
    }
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  shutdown(s, SHUT_WR);
  reader.join();
  el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%.1f MB/s %lld messages %.3f s %lld bytes\n", got / el / 1e6, msgs, el, (long long)got);
  return 0;
}
