// The kernel's NTP state of this machine's clock: what adjtimex(modes = 0) says
// (the frequency correction, the tick length, an offset being slewed, PLL/FLL,
// synchronised or not), for the recorder's clock-adjustment records and `check`.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace cptrace {

struct NtpState {
  int32_t status = 0;  // STA_* bits
  int64_t freq = 0;  // frequency correction, ppm with a 16-bit binary fraction
  int64_t tick = 0;  // µs per kernel tick (nominal 1e6 / USER_HZ = 10000)
  int64_t offset = 0;  // offset still to slew (PLL/FLL): ns with STA_NANO, else µs
  int64_t constant = 0;  // PLL time constant
  int64_t maxerror = 0;  // µs
  int64_t esterror = 0;  // µs
  int64_t adjtime_left_us = 0;  // an adjtime() (single-shot) slew still in progress, µs
  int32_t state = 0;  // adjtimex's return value: TIME_OK .. TIME_ERROR

  bool synchronised() const;
  bool pll() const;
  bool fll() const;
  double freq_ppm() const { return double(freq) / 65536.0; }
  int64_t offset_ns() const;
  // Nominal tick (1e6 / USER_HZ µs) against this one, in ppm (tick slews: chrony).
  double tick_ppm() const;
  // The kernel changes the clock's rate at every CLOCK_REALTIME second boundary
  // while this holds: a PLL/FLL offset being slewed, or an adjtime() slew.
  bool slewing() const;
  bool operator==(const NtpState&) const = default;
  // Same discipline: status, frequency, tick, offset, time constant and adjtime()
  // slew. maxerror and esterror are left out: the kernel grows maxerror every
  // second by itself, so they would make every reading a change.
  bool same_discipline(const NtpState& o) const;

  nlohmann::json to_json() const;
  static NtpState from_json(const nlohmann::json& j);
  // One line: "synchronised, PLL, frequency +12.345 ppm, tick 10000 µs (nominal), no offset being slewed".
  std::string describe() const;
};

// adjtimex(modes = 0) and the single-shot read (ADJ_OFFSET_SS_READ): reads only,
// any user may call it. Throws std::runtime_error naming the call if it fails.
NtpState read_ntp_state();

// /sys/devices/system/clocksource/clocksource0/current_clocksource ("tsc"), or
// "unknown (<why>)".
std::string current_clocksource();

}  // namespace cptrace
