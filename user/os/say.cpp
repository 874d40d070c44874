#include "os/say.h"

#include <unistd.h>

namespace cptrace {
namespace {

// Set once, before any thread starts: read without a lock, so that no
// thread (nor a child between fork and exec) can wait on one here.
std::string g_name;

}  // namespace

void set_command_name(std::string name) { g_name = std::move(name); }

std::string command_prefix() { return g_name.empty() ? "cptrace" : "cptrace " + g_name; }

void say_line(std::string_view text) {
  std::string line = fmt::format("{}: {}\n", command_prefix(), text);
  // stdio's stderr is unbuffered: fmt::print would still write it whole, but
  // write(2) states it. A short write (a closed pipe) loses only the message.
  for (size_t off = 0; off < line.size();) {
    ssize_t n = write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) return;
    off += size_t(n);
  }
}

}  // namespace cptrace
