// The instants at which the kernel may have changed the rate of this node's
// CLOCK_MONOTONIC during a recording, for the model that converts CLOCK_MONOTONIC
// stamps to TSC (its assumption "at most one rate change within any three
// consecutive segments between correlation points" is checked against these).
//
// Why these instants, and only these. The kernel advances CLOCK_MONOTONIC as
// clocksource cycles * mult >> shift; the rate changes when mult changes, and
// mult follows the NTP tick length (kernel/time/ntp.c, timekeeping.c):
//  - a clock-adjusting call (adjtimex / clock_adjtime with modes != 0:
//    ADJ_FREQUENCY, ADJ_TICK, ADJ_OFFSET, ADJ_STATUS, ADJ_SETOFFSET, ...;
//    clock_settime; settimeofday) recomputes the tick length, and for frequency
//    and tick changes the kernel updates mult inside the call (timekeeping_advance
//    with TK_ADV_FREQ): the change lies within [enter_mono_ns, mono_ns] of the
//    syscall record; other modes change the tick length, which the timekeeper
//    applies at its next update after the call. The candidate spans both: from
//    the call's entry to kChangeEffectNs after its exit. Failed calls change
//    nothing and are left out. Setting the time (a step of CLOCK_REALTIME) does
//    not move CLOCK_MONOTONIC itself but resets the NTP state, so it counts too.
//  - second_overflow() runs when CLOCK_REALTIME crosses a second boundary and
//    adds that second's chunk of a PLL/FLL offset slew (and of an adjtime()
//    single-shot slew) to the tick length, so while an offset is being slewed the
//    rate changes at every REALTIME second. The change takes effect at the first
//    timekeeping update at or after the boundary (the next tick on a busy CPU;
//    later on an idle NOHZ system): the boundary, converted to MONOTONIC with the
//    recorded REALTIME - MONOTONIC offset, is the earliest instant of that change,
//    and the candidate reaches kChangeEffectNs beyond it.
//    "While slewing" is taken from the recorded NTP states: from the correlation
//    point before the first state that shows a slew (the slew began after it)
//    to the first later state that shows none. A PLL/FLL offset that reads 0 may
//    still hold under 1 ns internally; its remaining chunks change the rate by
//    under 1 ppb and are ignored.
//  - A slew's last chunk stays in the tick length for the second after the one
//    that took it, so the base rate comes back at a boundary where every state
//    already reads "no slew" and no call is made (an adjtime() slew of more than
//    500 us ends this way): the first boundary after the state that ends a
//    slewing span is a candidate.
//  - A slew cut short (a new offset, 0 included, replaces the one being
//    slewed: ADJ_OFFSET) leaves the last second's chunk in the tick length
//    until the next second boundary, where second_overflow() puts the base
//    back: seen as an unannounced 180 ppm change 4 ms after a boundary, the
//    second after a test restored the clock mid-slew. So the first boundary
//    after every ADJ_OFFSET call, and the first after the recording's first
//    point (such a call made just before it began), are candidates too. So is
//    the second after every ADJ_OFFSET call: an adjtime() offset of up to
//    500 us (ADJ_OFFSET_SINGLESHOT includes the ADJ_OFFSET bit) goes in whole
//    at the first and comes out at the second, and no state shows it when no
//    point falls between the call and the first. (A step clears the NTP state
//    at once, tick length included.)
// Each boundary is one candidate: the same boundary found through different
// points' REALTIME - MONOTONIC readings comes out a few ns apart (the readings'
// widths); counted twice, it would leave its own windows crowded.
// A change of what only a call changes (frequency, tick, PLL constant, the
// status bits a caller sets) between two correlation points' NTP states with no
// adjusting call recorded there was made by a call the watch did not see (a
// 32-bit caller: compat syscalls miss the syscall tracepoints): two spans over
// that gap make its windows unchecked.
// A recording whose watch dropped call records (meta.json's
// clock_discipline.syscalls_dropped > 0) cannot say where its changes were:
// two spans over the whole recording make every window unchecked.
// Not candidates: the kernel's own mult dithering (timekeeping_adjust corrects the
// accumulated NTP error by +-1 of mult at ordinary ticks, a rate change of the
// order of 1 / mult, ~0.01-0.1 ppm): the model must absorb that as rate noise.
// Adjustments made while no recorder watched (before start, or with the syscall
// tracepoints missing) are seen only through the NTP states.
#pragma once
#include <cstdint>
#include <vector>

#include "clock/clock_bounds.h"
#include "clock/clock_history.h"

namespace cptrace {

// How long after its cause a change of the tick length reaches CLOCK_MONOTONIC:
// the timekeeper's next update, the next tick of a busy CPU (<= 10 ms at
// HZ >= 100).
constexpr uint64_t kChangeEffectNs = 10'000'000;

// Spans of CLOCK_MONOTONIC within which the clock's rate may have changed, over
// the recording's span (see above): sorted and unique, then the two whole-range
// spans of a dropped-records recording, if any.
std::vector<ClockChange> clock_change_candidates(const ClockHistory& h);

}  // namespace cptrace
