#include "record/skew_turn.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "record/run_dir.h"

namespace cptrace {

namespace {

// /run/cptrace (run_dir.h), or -1.
int open_run_dir() {
  int run = open("/run", O_DIRECTORY | O_CLOEXEC);
  if (run < 0) return -1;
  int dir = open_run_dir_level(run, "cptrace").fd;
  close(run);
  return dir;
}

}  // namespace

SkewTurn::SkewTurn(std::chrono::milliseconds max_wait) {
  int dir = open_run_dir();
  if (dir < 0) return;
  fd_ = openat(dir, "tsc-skew.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  close(dir);
  if (fd_ < 0) return;
  // Polled, not blocking: a recorder that holds it and hangs costs the others
  // max_wait, not their start.
  auto until = std::chrono::steady_clock::now() + max_wait;
  while (!(held_ = flock(fd_, LOCK_EX | LOCK_NB) == 0) && errno == EWOULDBLOCK &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

SkewTurn::~SkewTurn() {
  if (fd_ >= 0) close(fd_);  // closing drops the lock
}

TscSkew measure_tsc_skew_in_turn() {
  SkewTurn turn;
  return measure_tsc_skew();
}

}  // namespace cptrace
