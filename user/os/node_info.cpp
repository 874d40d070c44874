#include "os/node_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace cptrace {

std::string read_text_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool NodeInfo::invariant_tsc() const {
  auto has = [&](const char* f) { return std::find(tsc_flags.begin(), tsc_flags.end(), f) != tsc_flags.end(); };
  return has("constant_tsc") && has("nonstop_tsc");
}

nlohmann::json NodeInfo::to_json() const {
  return {{"host", host},           {"kernel", kernel},           {"cpu_model", cpu_model},
          {"tsc_flags", tsc_flags}, {"clocksource", clocksource}, {"boot_id", boot_id}};
}

NodeInfo read_node_info() {
  NodeInfo n;
  utsname u{};
  if (uname(&u) == 0) {
    n.host = u.nodename;
    n.kernel = std::string(u.release) + " " + u.machine;
  }
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  bool flags_done = false;
  while (std::getline(cpu, line)) {
    if (n.cpu_model.empty() && line.rfind("model name", 0) == 0) n.cpu_model = line.substr(line.find(':') + 2);
    if (!flags_done && line.rfind("flags", 0) == 0) {
      std::istringstream fl(line.substr(line.find(':') + 1));
      for (std::string f; fl >> f;)
        if (f == "constant_tsc" || f == "nonstop_tsc" || f == "tsc_known_freq" || f == "rdtscp")
          n.tsc_flags.push_back(f);
      flags_done = true;
    }
  }
  n.clocksource = read_text_file("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  n.boot_id = read_text_file("/proc/sys/kernel/random/boot_id");
  return n;
}

}  // namespace cptrace
