// How far the witnessed clock discipline lets CLOCK_MONOTONIC's rate stray from
// CLOCK_MONOTONIC_RAW's over a whole recording: the bound that still holds in a
// segment the conversion model cannot vouch for (clock_bounds.h), such as the
// seconds a recorder was stopped while the clock was being adjusted.
//
// The facts it rests on (kernel/time/ntp.c): the tick length, and so the rate
// of CLOCK_MONOTONIC against the clocksource that CLOCK_MONOTONIC_RAW follows
// unadjusted, is tick * USER_HZ us + the frequency correction (clamped to
// +-500 ppm) + the chunks of an offset being slewed (PLL/FLL or adjtime()),
// plus the timekeeper's dither of one unit of mult. Without an offset slew and
// without PPS discipline, only calls change the tick and the frequency; with
// every call witnessed and read, the rate stays within what the states and the
// calls set. Anything else (an offset slew, a dropped or unread call, PPS, a
// call that sets an offset or the time) leaves the envelope unknown.
#pragma once

#include "clock/clock_history.h"

namespace cptrace {

// CLOCK_MONOTONIC ns per CLOCK_MONOTONIC_RAW ns, anywhere in the recording.
struct RateEnvelope {
  long double lo = 0, hi = 0;
  bool known() const { return lo > 0 && hi >= lo; }
};

// Unknown (lo = hi = 0) unless every condition above holds.
RateEnvelope clock_rate_envelope(const ClockHistory& h);

}  // namespace cptrace
