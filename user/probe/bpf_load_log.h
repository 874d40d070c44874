// Why the kernel refused a BPF object, in the words a user needs: a verifier
// rejection names the program, the verifier's own reason, the kernel feature
// the program needs and the kernel's version; "Permission denied" is blamed on
// privileges only when privileges are missing.
#pragma once
#include <string>

namespace cptrace {

// Captures what libbpf prints (the verifier's log included) while alive, and
// stays quiet about it: the error message carries what matters.
class BpfLoadLog {
 public:
  BpfLoadLog();
  ~BpfLoadLog();
  BpfLoadLog(const BpfLoadLog&) = delete;
  BpfLoadLog& operator=(const BpfLoadLog&) = delete;
  std::string text() const;
};

// The sentence for a failed load: `err` is libbpf's error code, `log` what it
// printed (BpfLoadLog::text()), `what` the step ("loading the BPF programs").
std::string explain_load_failure(int err, const std::string& log, const std::string& what);

// Turns a libbpf error code into the sentence a user needs (no verifier log).
std::string explain_bpf_error(int err, const std::string& what);

// The same for a uprobe the kernel would not create: a refusal names the
// capability uprobes need (capabilities.h).
std::string explain_uprobe_error(int err, const std::string& what);

}  // namespace cptrace
