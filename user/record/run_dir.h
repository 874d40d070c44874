// The directories under /run that a recorder shares with other processes
// (/run/cptrace and below): children and other recorders trust what they find
// there, so a level is created if missing, never opened through a symlink, and
// used only when root owns it and nobody else may write in it.
#pragma once

namespace cptrace {

enum class RunDirFault { None, Creating, Opening, NotRootOnly };

struct RunDirLevel {
  int fd = -1;  // the caller closes it
  RunDirFault fault = RunDirFault::None;
  int err = 0;  // errno of Creating and Opening (a symlink: ELOOP or ENOTDIR)
};

// Level `name` in directory `parent`.
RunDirLevel open_run_dir_level(int parent, const char* name);

}  // namespace cptrace
