#include "record/run_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace cptrace {

RunDirLevel open_run_dir_level(int parent, const char* name) {
  RunDirLevel l;
  if (mkdirat(parent, name, 0755) != 0 && errno != EEXIST) return {-1, RunDirFault::Creating, errno};
  l.fd = openat(parent, name, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (l.fd < 0) return {-1, RunDirFault::Opening, errno};
  struct stat st {};
  if (fstat(l.fd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022)) {
    close(l.fd);
    return {-1, RunDirFault::NotRootOnly, 0};
  }
  return l;
}

}  // namespace cptrace
