#include "probe/bpf_load_log.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <sstream>
#include <string_view>
#include <vector>

#include <bpf/libbpf.h>
#include <fmt/format.h>

#include "probe/capabilities.h"
#include "probe/kernel_features.h"

namespace cptrace {

namespace {

std::mutex g_mu;
std::string g_log;
libbpf_print_fn_t g_prev = nullptr;

int capture(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  // libbpf hands a printf format and its va_list, so only the C formatter can expand
  // it. The verifier's log comes as one "%s" of up to megabytes: no fixed buffer.
  char* buf = nullptr;
  int n = vasprintf(&buf, format, args);
  if (n < 0) return n;
  std::lock_guard lk(g_mu);
  g_log.append(buf, size_t(n));
  free(buf);
  if (getenv("CPTRACE_BPF_LOG")) fmt::print(stderr, "{}", std::string_view(g_log).substr(g_log.size() - size_t(n)));
  return n;
}

// The capabilities that load tracing programs (capabilities.h), not euid 0:
// root in a container may hold far fewer.
bool privileged() { return can_load_bpf(); }

// The verifier's reason: the last lines of its log that are not statistics.
std::string verifier_reason(const std::string& log, const std::string& prog) {
  auto begin = log.find("prog '" + prog + "': -- BEGIN PROG LOAD LOG --");
  if (begin == std::string::npos) return "";
  begin = log.find('\n', begin);
  auto end = log.find("-- END PROG LOAD LOG --", begin);
  std::istringstream in(log.substr(begin + 1, end == std::string::npos ? std::string::npos : end - begin - 1));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l.rfind("processed ", 0) != 0 && l.rfind("verification time", 0) != 0 &&
        l.rfind("stack depth", 0) != 0 && l.rfind("libbpf:", 0) != 0)
      lines.push_back(l);
  if (lines.empty()) return "";
  return lines.size() == 1 ? lines.back() : lines[lines.size() - 2] + " / " + lines.back();
}

}  // namespace

BpfLoadLog::BpfLoadLog() {
  std::lock_guard lk(g_mu);
  g_log.clear();
  g_prev = libbpf_set_print(capture);
}

BpfLoadLog::~BpfLoadLog() { libbpf_set_print(g_prev); }

std::string BpfLoadLog::text() const {
  std::lock_guard lk(g_mu);
  return g_log;
}

std::string explain_load_failure(int err, const std::string& log, const std::string& what) {
  err = err < 0 ? -err : err;
  const std::string kernel = kernel_features().release;
  std::smatch m;
  static const std::regex failed_prog(R"(prog '([A-Za-z0-9_]+)': (BPF program load failed|failed to load))");
  if (std::regex_search(log, m, failed_prog)) {
    std::string prog = m[1], reason = verifier_reason(log, prog), need = feature_needed_by(prog);
    return fmt::format(
        "{}: the kernel (Linux {}) refused BPF program {} ({}){}{}", what, kernel, prog,
        reason.empty() ? strerror(err) : "verifier: " + reason, need.empty() ? "" : "; it needs " + need,
        privileged() ? "" : "; loading it needs CAP_SYS_ADMIN, or CAP_BPF + CAP_PERFMON, which this process lacks");
  }
  static const std::regex missing_ksym(R"(extern \(func ksym\) '([A-Za-z0-9_]+)': not found)");
  if (std::regex_search(log, m, missing_ksym))
    return fmt::format("{}: the kernel (Linux {}) lacks the kfunc {}", what, kernel, std::string(m[1]));
  return explain_bpf_error(err, what);
}

std::string explain_bpf_error(int err, const std::string& what) {
  err = err < 0 ? -err : err;
  std::string s = what + ": " + strerror(err);
  if ((err == EPERM || err == EACCES) && !privileged())
    s += " (recording needs CAP_SYS_ADMIN, or CAP_BPF + CAP_PERFMON, which this process lacks; see `cptrace check`)";
  else if (err == EPERM || err == EACCES)
    s += fmt::format(
        " (running with the privileges needed: the kernel, Linux {}, refused it; "
        "lockdown or a security module? see `cptrace check`)",
        kernel_features().release);
  return s;
}

std::string explain_uprobe_error(int err, const std::string& what) {
  err = err < 0 ? -err : err;
  if (err != EPERM && err != EACCES) return explain_bpf_error(err, what);
  return what + ": " + strerror(err) + uprobe_permission_hint();
}

}  // namespace cptrace
