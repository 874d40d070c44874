// `cptrace keygen`: a new MinRTT key file (sync/minrtt_protocol.h describes the
// format), created 0600 and never through a symlink.
#include "sync/minrtt_keygen.h"

#include <string>

#include <fmt/core.h>

#include "sync/minrtt_protocol.h"
#include "os/say.h"

namespace cptrace {

int run_keygen(const KeygenOptions& a) {
  minrtt::write_key_file(a.out, a.overwrite);
  say("new key in {} (mode 0600); copy it to every node, keeping the mode, and give it "
      "to sync, minrttd and record with --key",
      a.out);
  return 0;
}

}  // namespace cptrace
