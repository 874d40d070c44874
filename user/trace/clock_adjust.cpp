// ClockAdjust frames and the watch's record (clock_adjust.h).
#include "trace/clock_adjust.h"
#include "trace/json_text.h"
#include "os/time_units.h"

#include <cstring>
#include <stdexcept>

namespace cptrace {
namespace {

// The watch's syscall numbers (cptrace_clockadj.h), by name.
const char* syscall_name(uint32_t s) {
  switch (s) {
    case CP_CLKADJ_ADJTIMEX:
      return "adjtimex";
    case CP_CLKADJ_CLOCK_ADJTIME:
      return "clock_adjtime";
    case CP_CLKADJ_CLOCK_SETTIME:
      return "clock_settime";
    case CP_CLKADJ_SETTIMEOFDAY:
      return "settimeofday";
  }
  return "unknown";
}

}  // namespace

ClockAdjustment from_syscall_record(const cp_clockadj_rec& r) {
  ClockAdjustment a;
  a.kind = ClockAdjustKind::Syscall;
  a.mono_ns = r.exit_ns;
  a.enter_mono_ns = r.enter_ns;
  a.syscall = syscall_name(r.syscall);
  a.pid = r.tgid;
  a.comm = std::string(r.comm, strnlen(r.comm, sizeof r.comm));
  a.ret = r.ret;
  a.modes = r.modes;
  a.clockid = r.clockid;
  a.args_read = r.read_ok;
  a.offset = r.offset;
  a.freq = r.freq;
  a.tick = r.tick;
  a.constant = r.constant;
  a.status = r.status;
  a.set_ns = r.set_sec * kNsPerSecond + r.set_nsec;
  return a;
}

std::string clock_adjust_frame_json(const std::vector<ClockAdjustment>& a) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& x : a) j.push_back(x.to_json());
  return json_text(j);
}

std::vector<ClockAdjustment> clock_adjust_from_frame_json(const nlohmann::json& j) {
  if (!j.is_array()) throw std::runtime_error("clock adjustments frame is not a JSON array");
  std::vector<ClockAdjustment> out;
  for (const auto& e : j) out.push_back(ClockAdjustment::from_json(e));
  return out;
}

}  // namespace cptrace
