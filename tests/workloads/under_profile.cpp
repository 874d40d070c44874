// under_profile: runs a command as a container runtime would run it by default:
// with the runtime's default capabilities only and under its seccomp profile,
// given in moby's JSON format (Docker's profiles/seccomp/default.json, fetched by
// tools/runtime-profiles.sh), applied with libseccomp as runc applies it.
//
//   under_profile PROFILE.json -- CMD [ARG]...   apply, then execute CMD
//   under_profile PROFILE.json --check           apply, then call swapoff(2), which
//                                                the profile denies: exit 0 when it
//                                                failed with EPERM (the profile bites)
//
// Exit status: CMD's (exec); 2 on bad usage, 3 if the profile could not be read or
// applied, 4 if --check found the call allowed.
#include <linux/capability.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

// moby's oci/caps/defaults.go: what a container keeps unless told otherwise.
const std::map<std::string, int> kDefaultCaps = {{"CAP_CHOWN", CAP_CHOWN},
                                                 {"CAP_DAC_OVERRIDE", CAP_DAC_OVERRIDE},
                                                 {"CAP_FSETID", CAP_FSETID},
                                                 {"CAP_FOWNER", CAP_FOWNER},
                                                 {"CAP_MKNOD", CAP_MKNOD},
                                                 {"CAP_NET_RAW", CAP_NET_RAW},
                                                 {"CAP_SETGID", CAP_SETGID},
                                                 {"CAP_SETUID", CAP_SETUID},
                                                 {"CAP_SETFCAP", CAP_SETFCAP},
                                                 {"CAP_SETPCAP", CAP_SETPCAP},
                                                 {"CAP_NET_BIND_SERVICE", CAP_NET_BIND_SERVICE},
                                                 {"CAP_SYS_CHROOT", CAP_SYS_CHROOT},
                                                 {"CAP_KILL", CAP_KILL},
                                                 {"CAP_AUDIT_WRITE", CAP_AUDIT_WRITE}};

// Keeps only the default capabilities: bounding set, then effective, permitted
// and inheritable (the filter is loaded after this, so capset stays allowed).
bool drop_capabilities() {
  for (int c = 0; c <= CAP_LAST_CAP; c++) {
    bool keep = std::any_of(kDefaultCaps.begin(), kDefaultCaps.end(), [c](const auto& cap) { return cap.second == c; });
    if (!keep && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) return false;
  }
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  for (const auto& [name, num] : kDefaultCaps) data[num / 32].effective |= 1u << (num % 32);
  for (auto& d : data) d.permitted = d.inheritable = d.effective;
  return syscall(SYS_capset, &hdr, data) == 0;
}

bool kernel_at_least(const std::string& min) {
  utsname u{};
  uname(&u);
  unsigned a = 0, b = 0, x = 0, y = 0;
  sscanf(u.release, "%u.%u", &a, &b);
  sscanf(min.c_str(), "%u.%u", &x, &y);
  return a > x || (a == x && b >= y);
}

// A rule's includes/excludes as runc reads them, for amd64 and the default caps.
bool filter_matches(const json& f) {
  if (f.is_null()) return true;
  if (f.contains("arches")) {
    bool any = false;
    for (const auto& a : f["arches"]) any |= a == "amd64" || a == "x86_64";
    if (!any) return false;
  }
  if (f.contains("caps"))
    for (const auto& c : f["caps"])
      if (!kDefaultCaps.count(c.get<std::string>())) return false;
  if (f.contains("minKernel") && !kernel_at_least(f["minKernel"].get<std::string>())) return false;
  return true;
}

bool excluded(const json& f) {
  if (f.is_null() || f.empty()) return false;
  if (f.contains("arches"))
    for (const auto& a : f["arches"])
      if (a == "amd64" || a == "x86_64") return true;
  if (f.contains("caps"))
    for (const auto& c : f["caps"])
      if (kDefaultCaps.count(c.get<std::string>())) return true;
  if (f.contains("minKernel") && kernel_at_least(f["minKernel"].get<std::string>())) return true;
  return false;
}

uint32_t action_of(const std::string& name, const json& errno_ret) {
  int e = errno_ret.is_number() ? errno_ret.get<int>() : EPERM;
  if (name == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
  if (name == "SCMP_ACT_ERRNO") return SCMP_ACT_ERRNO(e);
  if (name == "SCMP_ACT_KILL") return SCMP_ACT_KILL;
  if (name == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
  if (name == "SCMP_ACT_TRAP") return SCMP_ACT_TRAP;
  if (name == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
  throw std::runtime_error("unknown action " + name);
}

scmp_compare op_of(const std::string& op) {
  static const std::vector<std::pair<std::string, scmp_compare>> ops = {{"SCMP_CMP_NE", SCMP_CMP_NE},
                                                                        {"SCMP_CMP_LT", SCMP_CMP_LT},
                                                                        {"SCMP_CMP_LE", SCMP_CMP_LE},
                                                                        {"SCMP_CMP_EQ", SCMP_CMP_EQ},
                                                                        {"SCMP_CMP_GE", SCMP_CMP_GE},
                                                                        {"SCMP_CMP_GT", SCMP_CMP_GT},
                                                                        {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
  for (const auto& [name, v] : ops)
    if (name == op) return v;
  throw std::runtime_error("unknown comparison " + op);
}

// The profile's rules for this machine into a filter; names libseccomp does not
// know are skipped, as runc does.
scmp_filter_ctx build(const json& p) {
  uint32_t def = action_of(p.at("defaultAction").get<std::string>(), p.value("defaultErrnoRet", json()));
  scmp_filter_ctx ctx = seccomp_init(def);
  if (!ctx) throw std::runtime_error("seccomp_init failed");
  for (const auto& s : p.at("syscalls")) {
    if (!filter_matches(s.value("includes", json())) || excluded(s.value("excludes", json()))) continue;
    uint32_t act = action_of(s.at("action").get<std::string>(), s.value("errnoRet", json()));
    if (act == def) continue;
    std::vector<scmp_arg_cmp> args;
    for (const auto& a : s.value("args", json::array()))
      args.push_back(SCMP_CMP(a.at("index").get<unsigned>(), op_of(a.at("op").get<std::string>()),
                              a.at("value").get<uint64_t>(), a.value("valueTwo", uint64_t(0))));
    for (const auto& n : s.at("names")) {
      int nr = seccomp_syscall_resolve_name(n.get<std::string>().c_str());
      if (nr == __NR_SCMP_ERROR) continue;
      int rc = seccomp_rule_add_array(ctx, act, nr, unsigned(args.size()), args.data());
      if (rc != 0) throw std::runtime_error("rule for " + n.get<std::string>() + ": " + strerror(-rc));
    }
  }
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = argc == 3 && !strcmp(argv[2], "--check");
  if (!check && (argc < 4 || strcmp(argv[2], "--")))
    return fprintf(stderr, "usage: under_profile PROFILE.json (-- CMD [ARG]... | --check)\n"), 2;
  try {
    std::ifstream in(argv[1]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    scmp_filter_ctx ctx = build(json::parse(in));
    if (!drop_capabilities()) throw std::runtime_error(std::string("dropping capabilities: ") + strerror(errno));
    int rc = seccomp_load(ctx);  // sets no_new_privs first (libseccomp's default)
    if (rc != 0) throw std::runtime_error(std::string("seccomp_load: ") + strerror(-rc));
    seccomp_release(ctx);
  } catch (const std::exception& e) {
    fprintf(stderr, "under_profile: %s: %s\n", argv[1], e.what());
    return 3;
  }
  if (check) {
    int r = swapoff("/nonexistent-under-profile");
    if (r != 0 && errno == EPERM) return 0;
    fprintf(stderr, "under_profile: swapoff was not denied (%s)\n", r ? strerror(errno) : "succeeded");
    return 4;
  }
  execvp(argv[3], argv + 3);
  fprintf(stderr, "under_profile: %s: %s\n", argv[3], strerror(errno));
  return 127;
}
