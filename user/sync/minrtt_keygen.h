// `cptrace keygen`: a new MinRTT key file (minrtt_protocol.h describes the
// format), created 0600 and never through a symlink.
#pragma once
#include <string>

namespace cptrace {

struct KeygenOptions {
  std::string out;
  bool overwrite = false;
};

// Writes the key file and says on stderr where it went; 0 (a failure throws).
int run_keygen(const KeygenOptions& a);

}  // namespace cptrace
