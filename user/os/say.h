// One channel for what a command says on stderr beside its output (progress,
// summaries, warnings): every line is "cptrace CMD: ..." with CMD named once,
// by the CLI, for the command the user ran; a stage that runs under several
// commands (MinRTT under record and sync, translate under cluster record) so
// speaks in the name of the one that ran it. One write per line: lines of
// threads never interleave.
#pragma once
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace cptrace {

// "record", "cluster", ...: set by the CLI before the command runs, before
// any thread starts ("cptrace" alone until then).
void set_command_name(std::string name);
// "cptrace record", the prefix of every line.
std::string command_prefix();
// Writes "<prefix>: <text>\n" to stderr.
void say_line(std::string_view text);
// Writes `bytes` to stderr as they are, whole (one write(2) loop, no
// allocation: async-signal-safe). A short write (a closed pipe) loses the rest.
void say_raw(std::string_view bytes);

template <typename... T>
void say(fmt::format_string<T...> f, T&&... args) {
  say_line(fmt::format(f, std::forward<T>(args)...));
}

}  // namespace cptrace
