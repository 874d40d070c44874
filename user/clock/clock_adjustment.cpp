// Clock adjustments: JSON and descriptions (clock_adjustment.h).
#include "clock/clock_adjustment.h"
#include "os/time_units.h"

#include <sys/timex.h>

#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace cptrace {
namespace {

const char* kind_name(ClockAdjustKind k) {
  switch (k) {
    case ClockAdjustKind::Syscall:
      return "syscall";
    case ClockAdjustKind::State:
      return "state";
    case ClockAdjustKind::Step:
      return "step";
  }
  return "?";
}

ClockAdjustKind kind_of(const std::string& s) {
  if (s == "syscall") return ClockAdjustKind::Syscall;
  if (s == "state") return ClockAdjustKind::State;
  if (s == "step") return ClockAdjustKind::Step;
  throw std::runtime_error("clock adjustment of unknown kind '" + s + "'");
}

// What a timex call asked for, in words.
std::string timex_request(const ClockAdjustment& a) {
  if (!a.args_read) return fmt::format("modes 0x{:x}", a.modes);
  std::vector<std::string> parts;
  if (a.modes & ADJ_FREQUENCY) parts.push_back(fmt::format("frequency {:+.3f} ppm", double(a.freq) / 65536.0));
  if (a.modes & ADJ_TICK) parts.push_back(fmt::format("tick {} µs", a.tick));
  if ((a.modes & ADJ_OFFSET_SINGLESHOT) == ADJ_OFFSET_SINGLESHOT)
    parts.push_back(fmt::format("adjtime() slew {} µs", a.offset));
  else if (a.modes & ADJ_OFFSET)
    parts.push_back(fmt::format("offset {} {}", a.offset, a.modes & ADJ_NANO ? "ns" : "(µs or ns per STA_NANO)"));
  if (a.modes & ADJ_SETOFFSET) parts.push_back("step (ADJ_SETOFFSET)");
  if (a.modes & ADJ_STATUS) parts.push_back(fmt::format("status 0x{:x}", a.status));
  if (a.modes & ADJ_TIMECONST) parts.push_back(fmt::format("time constant {}", a.constant));
  if (parts.empty()) return fmt::format("modes 0x{:x}", a.modes);
  std::string s = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) s += ", " + parts[i];
  return s;
}

}  // namespace

bool ClockAdjustment::adjusting() const {
  if (kind != ClockAdjustKind::Syscall || ret < 0) return false;
  // A timex the watch could not read may have asked for anything: adjusting.
  if (syscall == "adjtimex" || syscall == "clock_adjtime")
    return !args_read || (modes != 0 && modes != ADJ_OFFSET_SS_READ);
  if (syscall == "settimeofday") return !args_read || set_ns != 0;  // unread: assume it set the time
  return true;  // clock_settime
}

std::string ClockAdjustment::describe() const {
  switch (kind) {
    case ClockAdjustKind::Syscall: {
      std::string what = syscall == "adjtimex" || syscall == "clock_adjtime"
                             ? (!args_read   ? std::string("arguments unreadable: taken as a change")
                                : modes == 0 ? std::string("read")
                                             : timex_request(*this))
                         : args_read ? fmt::format("set to {}.{:09d} s", set_ns / kNsPerSecond, set_ns % kNsPerSecond)
                                     : std::string("set");
      std::string clk = clockid == 0 ? "(CLOCK_REALTIME)" : clockid > 0 ? fmt::format("(clock {})", clockid) : "";
      std::string res = ret < 0 ? fmt::format(" -> error {}", -ret) : "";
      return fmt::format("{}{} by {}[{}]: {}{}", syscall, clk, comm, pid, what, res);
    }
    case ClockAdjustKind::State:
      return "NTP state: " + state.describe();
    case ClockAdjustKind::Step:
      return fmt::format("CLOCK_REALTIME stepped by {:+.6f} s", ns_to_seconds(double(step_ns)));
  }
  return "?";
}

nlohmann::json ClockAdjustment::to_json() const {
  nlohmann::json j = {{"kind", kind_name(kind)}, {"mono_ns", mono_ns}, {"tsc", tsc}};
  switch (kind) {
    case ClockAdjustKind::Syscall:
      j.update({{"syscall", syscall},
                {"enter_mono_ns", enter_mono_ns},
                {"pid", pid},
                {"comm", comm},
                {"ret", ret},
                {"modes", modes},
                {"clockid", clockid},
                {"args_read", args_read},
                {"offset", offset},
                {"freq", freq},
                {"tick", tick},
                {"constant", constant},
                {"status", status},
                {"set_ns", set_ns}});
      break;
    case ClockAdjustKind::State:
      j["state"] = state.to_json();
      break;
    case ClockAdjustKind::Step:
      j.update({{"step_ns", step_ns}, {"rt_minus_mono_ns", rt_minus_mono_ns}, {"since_mono_ns", since_mono_ns}});
      break;
  }
  return j;
}

ClockAdjustment ClockAdjustment::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("clock adjustment is not a JSON object");
  ClockAdjustment a;
  a.kind = kind_of(j.at("kind").get<std::string>());
  a.mono_ns = j.at("mono_ns").get<uint64_t>();
  a.tsc = j.value("tsc", uint64_t{0});
  switch (a.kind) {
    case ClockAdjustKind::Syscall:
      a.syscall = j.at("syscall").get<std::string>();
      a.enter_mono_ns = j.value("enter_mono_ns", a.mono_ns);
      a.pid = j.value("pid", uint32_t{0});
      a.comm = j.value("comm", "");
      a.ret = j.value("ret", int64_t{0});
      a.modes = j.value("modes", uint32_t{0});
      a.clockid = j.value("clockid", int32_t{-1});
      a.args_read = j.value("args_read", false);
      a.offset = j.value("offset", int64_t{0});
      a.freq = j.value("freq", int64_t{0});
      a.tick = j.value("tick", int64_t{0});
      a.constant = j.value("constant", int64_t{0});
      a.status = j.value("status", int32_t{0});
      a.set_ns = j.value("set_ns", int64_t{0});
      break;
    case ClockAdjustKind::State:
      a.state = NtpState::from_json(j.at("state"));
      break;
    case ClockAdjustKind::Step:
      a.step_ns = j.at("step_ns").get<int64_t>();
      a.rt_minus_mono_ns = j.value("rt_minus_mono_ns", int64_t{0});
      a.since_mono_ns = j.value("since_mono_ns", a.mono_ns);
      break;
  }
  return a;
}

}  // namespace cptrace
