// A clock adjustment a recording saw: what the conversion of CLOCK_MONOTONIC
// stamps to TSC needs to know about the clock's discipline, and what `info` and
// `report` show.
//
//  - syscall: an adjtimex / clock_adjtime / clock_settime / settimeofday call by
//    any process, seen by bpf/clockadj.bpf.c, stamped at entry and exit;
//  - state:   the kernel's NTP state (adjtimex(modes = 0)) read at a correlation
//    point, recorded when it differs from the previous reading (and at start);
//  - step:    CLOCK_REALTIME - CLOCK_MONOTONIC changed between two correlation
//    points: the wall clock stepped (a set, an ADJ_SETOFFSET, a leap second).
//
// The JSON form is the one ClockAdjust frames and translate's meta.json carry.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "clock/ntp_state.h"

namespace cptrace {

enum class ClockAdjustKind : uint8_t { Syscall = 1, State = 2, Step = 3 };

struct ClockAdjustment {
  ClockAdjustKind kind = ClockAdjustKind::State;
  uint64_t mono_ns = 0;  // syscall: its exit; state: the correlation point; step: the point that saw it
  uint64_t tsc = 0;  // mono_ns on the node's TSC (TraceReader converts syscalls through the points)

  // kind == Syscall
  std::string syscall;  // "adjtimex", "clock_adjtime", "clock_settime", "settimeofday"
  uint64_t enter_mono_ns = 0;  // the change was made in [enter_mono_ns, mono_ns]
  uint32_t pid = 0;
  std::string comm;
  int64_t ret = 0;  // < 0: -errno, nothing changed
  uint32_t modes = 0;  // ADJ_* asked for (adjtimex, clock_adjtime); 0: a read
  int32_t clockid = -1;
  bool args_read = false;  // the values below were read from the caller
  int64_t offset = 0, freq = 0, tick = 0, constant = 0;  // timex values passed (per modes)
  int32_t status = 0;
  int64_t set_ns = 0;  // clock_settime / settimeofday: the time set

  // kind == State
  NtpState state;

  // kind == Step
  int64_t step_ns = 0;  // change of REALTIME - MONOTONIC (>= the true step's size - widths)
  int64_t rt_minus_mono_ns = 0;  // the new offset (lower end of its interval)
  uint64_t since_mono_ns = 0;  // the step happened in (since_mono_ns, mono_ns]

  // A syscall that can change the clock: adjtimex / clock_adjtime with modes != 0,
  // clock_settime, or settimeofday with a time, that succeeded.
  bool adjusting() const;
  // "adjtimex by chronyd[812]: frequency +200.000 ppm" and the like.
  std::string describe() const;

  nlohmann::json to_json() const;
  static ClockAdjustment from_json(const nlohmann::json& j);  // throws std::runtime_error when malformed
};

}  // namespace cptrace
