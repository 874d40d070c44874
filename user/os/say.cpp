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

void say_raw(std::string_view bytes) {
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = write(STDERR_FILENO, bytes.data() + off, bytes.size() - off);
    if (n <= 0) return;
    off += size_t(n);
  }
}

void say_line(std::string_view text) {
  // stdio's stderr is unbuffered: fmt::print would still write it whole, but
  // write(2) states it. A short write (a closed pipe) loses only the message.
  say_raw(fmt::format("{}: {}\n", command_prefix(), text));
}

}  // namespace cptrace
