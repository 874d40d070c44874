#include "os/exec_argv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

namespace cptrace {

ExecArgv::ExecArgv(const std::vector<std::string>& args) {
  for (const auto& a : args) argv_.push_back(const_cast<char*>(a.c_str()));
  argv_.push_back(nullptr);
}

void ExecArgv::exec_or_exit(bool search_path, const char* prefix) const {
  if (search_path)
    execvp(argv_[0], argv_.data());
  else
    execv(argv_[0], argv_.data());
  dprintf(2, "%scannot run %s: %s\n", prefix, argv_[0], strerror(errno));
  _exit(127);
}

}  // namespace cptrace
