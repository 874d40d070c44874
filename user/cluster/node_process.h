// A program started on a node through its transport: a child process with its
// stdin, stdout and stderr on pipes, in its own process group (so the
// terminal's Ctrl-C reaches only the controller, which stops the nodes in
// order). No shell on this side: the argv is executed as given.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace cptrace {

struct NodeProcess {
  pid_t pid = -1;
  int in = -1;  // its stdin (we write)
  int out = -1;  // its stdout (we read)
  int err = -1;  // its stderr (we read)
};

// Starts `argv`; throws std::runtime_error when fork or the pipes fail (an exec
// failure shows as exit status 127 and a line on its stderr).
NodeProcess spawn_node_process(const std::vector<std::string>& argv);

struct CaptureResult {
  int status = -1;  // exit status, 128 + signal, -1 on timeout
  std::string out, err;
};
// Runs `argv` to its end (at most `timeout_s`, then SIGKILL), stdin closed.
CaptureResult run_capture(const std::vector<std::string>& argv, double timeout_s);

// Exit status of a waitpid status word: the code, or 128 + signal.
int exit_status(int wstatus);
// The last `lines` lines of `s`, trimmed.
std::string tail_lines(const std::string& s, size_t lines);
// The argv as one line, for messages.
std::string join_argv(const std::vector<std::string>& argv);

}  // namespace cptrace
