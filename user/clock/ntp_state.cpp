// Reading and describing the kernel's NTP state (ntp_state.h).
#include "clock/ntp_state.h"

#include <sys/timex.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace cptrace {

bool NtpState::synchronised() const { return !(status & STA_UNSYNC); }
bool NtpState::pll() const { return (status & STA_PLL) && !(status & STA_FLL); }
bool NtpState::fll() const { return status & STA_FLL; }
int64_t NtpState::offset_ns() const { return status & STA_NANO ? offset : offset * 1000; }

double NtpState::tick_ppm() const {
  long hz = sysconf(_SC_CLK_TCK);
  double nominal = 1e6 / double(hz > 0 ? hz : 100);
  return (double(tick) / nominal - 1) * 1e6;
}

// A PLL/FLL offset whose reported value is 0 can still hold less than 1 ns
// internally: its remaining per-second chunks change the rate by under 1 ppb.
// The kernel applies the remaining PLL/FLL offset in chunks at every second
// boundary whatever the status bits say (second_overflow: clearing STA_PLL
// mid-slew does not stop it), so any offset left is a slew.
bool NtpState::slewing() const { return offset != 0 || adjtime_left_us != 0; }

bool NtpState::same_discipline(const NtpState& o) const {
  return status == o.status && freq == o.freq && tick == o.tick && offset == o.offset && constant == o.constant &&
         adjtime_left_us == o.adjtime_left_us;
}

nlohmann::json NtpState::to_json() const {
  return {{"status", status},       {"freq", freq},
          {"freq_ppm", freq_ppm()}, {"tick", tick},
          {"offset", offset},       {"offset_ns", offset_ns()},
          {"constant", constant},   {"maxerror", maxerror},
          {"esterror", esterror},   {"adjtime_left_us", adjtime_left_us},
          {"state", state}};
}

NtpState NtpState::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("NTP state is not a JSON object");
  NtpState s;
  s.status = j.at("status").get<int32_t>();
  s.freq = j.at("freq").get<int64_t>();
  s.tick = j.at("tick").get<int64_t>();
  s.offset = j.at("offset").get<int64_t>();
  s.constant = j.value("constant", int64_t{0});
  s.maxerror = j.value("maxerror", int64_t{0});
  s.esterror = j.value("esterror", int64_t{0});
  s.adjtime_left_us = j.value("adjtime_left_us", int64_t{0});
  s.state = j.value("state", int32_t{0});
  return s;
}

std::string NtpState::describe() const {
  std::string mode = fll() ? "FLL" : pll() ? "PLL" : "no PLL/FLL";
  double tp = tick_ppm();
  std::string tick_s = std::fabs(tp) < 0.5 ? fmt::format("tick {} µs (nominal)", tick)
                                           : fmt::format("tick {} µs ({:+.0f} ppm)", tick, tp);
  std::string slew = "no offset being slewed";
  if ((status & (STA_PLL | STA_FLL)) && offset != 0) slew = fmt::format("offset {} ns being slewed", offset_ns());
  if (adjtime_left_us != 0) slew += fmt::format(", adjtime() slew of {} µs in progress", adjtime_left_us);
  return fmt::format("{}, {}, frequency {:+.3f} ppm, {}, {}", synchronised() ? "synchronised" : "unsynchronised", mode,
                     freq_ppm(), tick_s, slew);
}

NtpState read_ntp_state() {
  timex t{};
  int r = adjtimex(&t);
  if (r < 0) throw std::runtime_error(fmt::format("adjtimex(modes=0): {}", strerror(errno)));
  NtpState s;
  s.status = t.status;
  s.freq = t.freq;
  s.tick = t.tick;
  s.offset = t.offset;
  s.constant = t.constant;
  s.maxerror = t.maxerror;
  s.esterror = t.esterror;
  s.state = r;
  timex ss{};
  ss.modes = ADJ_OFFSET_SS_READ;  // read-only: the adjtime() slew left
  if (adjtimex(&ss) >= 0) s.adjtime_left_us = ss.offset;
  return s;
}

std::string current_clocksource() {
  const char* path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s) || s.empty()) return fmt::format("unknown ({} unreadable)", path);
  return s;
}

}  // namespace cptrace
