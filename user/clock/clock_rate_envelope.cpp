// The rate envelope of CLOCK_MONOTONIC against RAW (clock_rate_envelope.h).
#include "clock/clock_rate_envelope.h"

#include <sys/timex.h>
#include <unistd.h>

#include <algorithm>

#include "clock/clock_bounds.h"

namespace cptrace {
namespace {

constexpr long double kMaxFreqPpm = 500;  // the kernel's clamp (MAXFREQ)
// Modes that change neither an offset nor the time: their effect is the values read.
constexpr unsigned kRateModes = ADJ_FREQUENCY | ADJ_MAXERROR | ADJ_ESTERROR | ADJ_STATUS | ADJ_TIMECONST | ADJ_TAI |
                                ADJ_MICRO | ADJ_NANO | ADJ_TICK;
constexpr int32_t kPps = STA_PPSFREQ | STA_PPSTIME;

struct Span {
  long double lo = 1e300L, hi = -1e300L;
  void add(long double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  bool empty() const { return lo > hi; }
};

long double scaled_ppm(int64_t freq) { return std::clamp<long double>(freq / 65536.0L, -kMaxFreqPpm, kMaxFreqPpm); }

}  // namespace

RateEnvelope clock_rate_envelope(const ClockHistory& h) {
  if (!h.every_call_seen()) return {};
  long hz = sysconf(_SC_CLK_TCK);
  const long double nominal_tick = 1e6L / (hz > 0 ? hz : 100);
  Span tick, freq;
  for (const ClockAdjustment& a : h.adjustments) {
    if (a.kind == ClockAdjustKind::Step) return {};
    if (a.kind == ClockAdjustKind::State) {
      if (a.state.slewing() || (a.state.status & kPps)) return {};
      tick.add(a.state.tick), freq.add(scaled_ppm(a.state.freq));
      continue;
    }
    if (!a.adjusting()) continue;
    if (!a.args_read || a.syscall == "clock_settime" || a.syscall == "settimeofday") return {};
    if ((a.modes & ~kRateModes) || ((a.modes & ADJ_STATUS) && (a.status & kPps))) return {};
    if (a.modes & ADJ_TICK) tick.add(a.tick);
    if (a.modes & ADJ_FREQUENCY) freq.add(scaled_ppm(a.freq));
  }
  if (tick.empty() || freq.empty()) return {};  // no state read: the discipline at start is unknown
  const long double d = kDitherPpm * 1e-6L;
  return {tick.lo / nominal_tick + freq.lo * 1e-6L - d, tick.hi / nominal_tick + freq.hi * 1e-6L + d};
}

}  // namespace cptrace
