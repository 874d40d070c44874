// The clock's discipline in the trace: version-1 and version-2 correlation points,
// clock-adjustment records, the extra points' schedule, and the instants at which
// the clock's rate may have changed.
#include <gtest/gtest.h>

#include <map>

#include <sys/timex.h>

#include <cstring>

#include "clock/clock_schedule.h"
#include "trace/block_codec.h"
#include "trace/pid_table.h"
#include "trace/clock_adjust.h"
#include "clock/clock_change_candidates.h"
#include "clock/clock_map.h"
#include "clock/clock_rate_envelope.h"
#include "trace/trace_reader.h"

namespace cptrace {
namespace {

std::string bytes_of(const EncodedFrame& f) {
  std::string b(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr);
  b.append(f.payload.begin(), f.payload.end());
  return b;
}

// A version-1 Clock frame as older recorders wrote it: 24-byte points.
EncodedFrame clock_v1(const std::vector<ClockPoint>& pts) {
  std::string raw;
  for (const ClockPoint& p : pts) raw.append(reinterpret_cast<const char*>(&p), kClockPointV1Bytes);
  EncodedFrame f;
  finish_frame(f, FrameType::Clock, reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), uint32_t(pts.size()), 1);
  return f;
}

TEST(ClockFormat, VersionOneFramesStayReadable) {
  ClockPoint a{1000, 500, 7, 0}, b{3000, 1500, 9, 0};
  a.raw_ns = 99;  // not stored by version 1
  TraceReader r = TraceReader::from_bytes(file_header_bytes() + bytes_of(clock_v1({a, b})));
  ASSERT_FALSE(r.error()) << r.error()->what();
  ASSERT_EQ(r.clock().size(), 2u);
  EXPECT_EQ(r.clock()[0].tsc, 1000u);
  EXPECT_EQ(r.clock()[1].mono_ns, 1500u);
  EXPECT_EQ(r.clock()[1].width_ticks, 9u);
  EXPECT_FALSE(r.clock()[0].has_raw());
  EXPECT_EQ(r.clock()[0].raw_ns, 0u);
  EXPECT_EQ(r.clock_map().mono_to_tsc(1000), 2000u);
}

TEST(ClockFormat, VersionTwoRoundTripsRawAndRealtime) {
  ClockPoint p = sample_clock_point();
  ASSERT_TRUE(p.has_raw());
  ASSERT_TRUE(p.has_realtime()) << "no step happens here: the two REALTIME reads agree";
  EXPECT_LT(p.rt_width_ns, 100000u) << "REALTIME - MONOTONIC read within 100 µs";
  EncodedFrame f = encode_clock({p});
  EXPECT_EQ(f.hdr.type, uint16_t(FrameType::Clock2));
  std::vector<ClockPoint> back = decode_clock(f.hdr, f.payload.data(), f.payload.size());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], p);
  // The MONOTONIC_RAW bracket is its own: close to the MONOTONIC one, not the same reading.
  EXPECT_LT(std::llabs(int64_t(p.raw_tsc) - int64_t(p.tsc)), int64_t(1) << 32);
}

TEST(ClockFormat, BadVersionTwoFramesAreClearErrorsWithTheirOffset) {
  ClockPoint p{1, 2, 3, kClockHasRaw};
  std::string head = file_header_bytes() + bytes_of(encode_clock({p}));
  // A version-2 header claiming 24-byte points.
  EncodedFrame bad;
  std::vector<uint8_t> raw(kClockPointV1Bytes);
  std::memcpy(raw.data(), &p, raw.size());
  finish_frame(bad, FrameType::Clock2, raw.data(), raw.size(), 1, 0);
  TraceReader r = TraceReader::from_bytes(head + bytes_of(bad));
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->offset(), head.size());
  EXPECT_NE(std::string(r.error()->what()).find("clock frame (version 2): raw_len 24 != count 1 * 56"),
            std::string::npos)
      << r.error()->what();
  EXPECT_EQ(r.clock().size(), 1u) << "the good frame before it is kept";
  // Unknown flag bits: a newer writer's meaning we cannot honour.
  ClockPoint q = p;
  q.flags = 0x80;
  TraceReader r2 = TraceReader::from_bytes(head + bytes_of(encode_clock({q})));
  ASSERT_TRUE(r2.error());
  EXPECT_EQ(r2.error()->offset(), head.size());
  EXPECT_NE(std::string(r2.error()->what()).find("unknown flags 0x80"), std::string::npos) << r2.error()->what();
}

ClockAdjustment syscall_adj(uint64_t mono, uint32_t modes, int64_t ret = 0) {
  ClockAdjustment a;
  a.kind = ClockAdjustKind::Syscall;
  a.syscall = "adjtimex";
  a.mono_ns = mono;
  a.enter_mono_ns = mono - 1000;
  a.modes = modes;
  a.ret = ret;
  a.args_read = true;
  a.freq = 200 << 16;
  a.comm = "ntpd";
  a.pid = 42;
  return a;
}

ClockAdjustment state_adj(uint64_t mono, int32_t status, int64_t offset) {
  ClockAdjustment a;
  a.kind = ClockAdjustKind::State;
  a.mono_ns = a.tsc = mono;
  a.state.status = status;
  a.state.offset = offset;
  a.state.tick = 10000;
  return a;
}

TEST(ClockAdjustments, JsonRoundTripAndReaderAccessor) {
  ClockAdjustment s = syscall_adj(1'500'000'000, ADJ_FREQUENCY);
  ClockAdjustment st = state_adj(1'600'000'000, STA_PLL | STA_NANO, 2'000'000);
  ClockAdjustment step;
  step.kind = ClockAdjustKind::Step;
  step.mono_ns = step.tsc = 1'700'000'000;
  step.step_ns = 1'000'000'000;
  step.since_mono_ns = 1'600'000'000;
  std::vector<ClockAdjustment> all{s, st, step};
  std::string j = clock_adjust_frame_json(all);
  ClockPoint a{1'000'000'000, 1'000'000'000, 1, 0}, b{3'000'000'000, 2'000'000'000, 1, 0};
  TraceReader r = TraceReader::from_bytes(file_header_bytes() + bytes_of(encode_clock({a, b})) +
                                          bytes_of(encode_json(FrameType::ClockAdjust, j, 3)));
  ASSERT_FALSE(r.error()) << r.error()->what();
  ASSERT_EQ(r.clock_adjustments().size(), 3u);
  EXPECT_EQ(r.clock_adjustments()[0].tsc, 2'000'000'000u) << "the syscall's instant through the points";
  EXPECT_EQ(r.clock_adjustments()[0].describe(), "adjtimex by ntpd[42]: frequency +200.000 ppm");
  EXPECT_TRUE(r.clock_adjustments()[1].state.slewing());
  EXPECT_EQ(r.clock_adjustments()[1].state.offset_ns(), 2'000'000);
  EXPECT_EQ(r.clock_adjustments()[2].describe(), "CLOCK_REALTIME stepped by +1.000000 s");
  EXPECT_EQ(r.clock_adjustments()[2].since_mono_ns, 1'600'000'000u);
  // A malformed record stops the scan there, naming the frame.
  std::string good = file_header_bytes() + bytes_of(encode_clock({a, b}));
  TraceReader bad =
      TraceReader::from_bytes(good + bytes_of(encode_json(FrameType::ClockAdjust, R"([{"kind":"warp"}])", 1)));
  ASSERT_TRUE(bad.error());
  EXPECT_EQ(bad.error()->offset(), good.size());
  EXPECT_NE(std::string(bad.error()->what()).find("clock adjustments"), std::string::npos) << bad.error()->what();
}

TEST(ClockAdjustments, OnlyCallsThatCanChangeTheClockAreAdjusting) {
  EXPECT_TRUE(syscall_adj(1, ADJ_FREQUENCY).adjusting());
  EXPECT_FALSE(syscall_adj(1, 0).adjusting()) << "a read";
  EXPECT_FALSE(syscall_adj(1, ADJ_OFFSET_SS_READ).adjusting()) << "the adjtime() remainder read";
  EXPECT_FALSE(syscall_adj(1, ADJ_FREQUENCY, -1).adjusting()) << "EPERM: nothing changed";
  ClockAdjustment set = syscall_adj(1, 0);
  set.syscall = "clock_settime";
  EXPECT_TRUE(set.adjusting());
  // A timex the watch could not read (not faulted in) may have asked for
  // anything: a change, never a read.
  ClockAdjustment unread = syscall_adj(1, 0);
  unread.args_read = false;
  EXPECT_TRUE(unread.adjusting());
  EXPECT_EQ(unread.describe(), "adjtimex by ntpd[42]: arguments unreadable: taken as a change");
}

// The kernel slews the PLL offset left at every second boundary whatever the
// status says: clearing STA_PLL mid-slew does not stop it.
TEST(ClockAdjustments, AnOffsetLeftIsASlewWithOrWithoutStaPll) {
  EXPECT_TRUE(state_adj(1, STA_PLL | STA_NANO, 2'000'000).state.slewing());
  EXPECT_TRUE(state_adj(1, STA_NANO, 2'000'000).state.slewing());
  EXPECT_FALSE(state_adj(1, STA_PLL | STA_NANO, 0).state.slewing());
}

// A call the watch did not see (a 32-bit caller: compat syscalls miss the
// syscall tracepoints) shows in the NTP state at the next point: the span since
// the point before holds a change nobody placed, so its windows are unchecked.
TEST(ClockChangeCandidates, StateChangedByNoSeenCallLeavesItsWindowsUnchecked) {
  std::vector<ClockPoint> pts;
  for (uint64_t m = 1'000'000'000; m <= 3'000'000'000; m += 100'000'000) pts.push_back({m * 2, m, 10, 0});
  ClockAdjustment s0 = state_adj(1'000'000'000, STA_NANO, 0), s1 = state_adj(1'500'000'000, STA_NANO, 0);
  s1.state.freq = 200 << 16;
  auto reader = [&](std::vector<ClockAdjustment> adj) {
    return TraceReader::from_bytes(
        file_header_bytes() + bytes_of(encode_clock(pts)) +
        bytes_of(encode_json(FrameType::ClockAdjust, clock_adjust_frame_json(adj), uint32_t(adj.size()))));
  };
  TraceReader unseen = reader({s0, s1});
  ASSERT_FALSE(unseen.error()) << unseen.error()->what();
  EXPECT_EQ(clock_change_candidates(unseen.clock_history()),
            (std::vector<ClockChange>{{1'400'000'000, 1'500'000'000}, {1'400'000'000, 1'500'000'000}}));
  // The segment, its neighbours, and the two whose windows end on its points
  // (spans count with their ends: wider, never wrong).
  EXPECT_EQ(unseen.clock_map().model_stats().crowded, 5u);
  TraceReader seen = reader({s0, syscall_adj(1'450'000'000, ADJ_FREQUENCY), s1});
  EXPECT_EQ(clock_change_candidates(seen.clock_history()).size(), 1u) << "the call alone";
  EXPECT_EQ(seen.clock_map().model_stats().crowded, 0u);
}

// The rate envelope (clock_rate_envelope.h): with every call witnessed and
// read, the tick and frequency the states and calls set bound CLOCK_MONOTONIC's
// rate against RAW; anything that could move it otherwise leaves it unknown.
TEST(ClockRateEnvelope, WhatTheWitnessedDisciplineAllows) {
  std::vector<ClockPoint> pts;
  for (uint64_t m = 1'000'000'000; m <= 2'000'000'000; m += 100'000'000) pts.push_back({m * 2, m, 10, 0});
  const nlohmann::json watched = {{"clock_discipline", {{"syscalls_watched", true}, {"syscalls_dropped", 0}}}};
  // No reader needed: the model reads a plain history (clock_history.h).
  auto envelope = [&](std::vector<ClockAdjustment> adj, const nlohmann::json& meta) {
    return clock_rate_envelope(ClockHistory::from_meta(meta, pts, adj));
  };
  ClockAdjustment s0 = state_adj(1'000'000'000, STA_NANO, 0);
  s0.state.freq = -100 << 16;
  ClockAdjustment fast = syscall_adj(1'300'000'000, ADJ_FREQUENCY);  // +200 ppm
  ClockAdjustment huge = syscall_adj(1'400'000'000, ADJ_FREQUENCY);
  huge.freq = 900ll << 16;  // the kernel clamps it to +500 ppm
  RateEnvelope e = envelope({s0, fast}, watched);
  ASSERT_TRUE(e.known());
  EXPECT_NEAR(double(e.lo), 1 - 100e-6 - 1e-6, 1e-9);
  EXPECT_NEAR(double(e.hi), 1 + 200e-6 + 1e-6, 1e-9);
  EXPECT_NEAR(double(envelope({s0, huge}, watched).hi), 1 + 500e-6 + 1e-6, 1e-9);
  ClockAdjustment tick = syscall_adj(1'500'000'000, ADJ_TICK);
  tick.tick = 10200;  // chrony's tick slew: +2 %
  EXPECT_NEAR(double(envelope({s0, tick}, watched).hi), 1.02 - 100e-6 + 1e-6, 1e-9);  // with the state's freq
  // Unknown: the watch not running or dropping, no state read, an offset being
  // slewed, a call that sets an offset or the time, a call whose values were not read.
  EXPECT_FALSE(envelope({s0, fast}, nlohmann::json::object()).known());
  EXPECT_FALSE(envelope({s0}, {{"clock_discipline", {{"syscalls_watched", true}, {"syscalls_dropped", 2}}}}).known());
  EXPECT_FALSE(envelope({fast}, watched).known());
  EXPECT_FALSE(envelope({state_adj(1'000'000'000, STA_PLL | STA_NANO, 2'000'000)}, watched).known());
  EXPECT_FALSE(envelope({s0, syscall_adj(1'300'000'000, ADJ_OFFSET | ADJ_NANO)}, watched).known());
  EXPECT_FALSE(envelope({s0, syscall_adj(1'300'000'000, ADJ_OFFSET_SINGLESHOT)}, watched).known());
  ClockAdjustment unread = fast;
  unread.args_read = false;
  EXPECT_FALSE(envelope({s0, unread}, watched).known());
  ClockAdjustment settime = fast;
  settime.syscall = "clock_settime";
  EXPECT_FALSE(envelope({s0, settime}, watched).known());
  // A failed call and a read change nothing.
  EXPECT_TRUE(
      envelope({s0, syscall_adj(1'300'000'000, ADJ_OFFSET, -1), syscall_adj(1'300'000'000, 0)}, watched).known());
}

TEST(ClockSchedule, PointsAfterAChangeAndAroundSecondBoundaries) {
  ClockSchedule s;
  EXPECT_FALSE(s.next());
  s.on_change(1'000'000'000);
  std::vector<uint64_t> got;
  while (auto n = s.next()) {
    got.push_back(*n);
    EXPECT_TRUE(s.take_due(*n));
  }
  EXPECT_EQ(got, (std::vector<uint64_t>{1'000'000'000, 1'002'000'000, 1'005'000'000, 1'010'000'000, 1'020'000'000,
                                        1'050'000'000}));
  EXPECT_FALSE(s.take_due(2'000'000'000));
  // REALTIME = MONOTONIC + 0.25 s: the next boundary after mono 1.5 s (REALTIME
  // 1.75 s) is REALTIME 2 s = mono 1.75 s.
  s.around_second(1'500'000'000, 250'000'000);
  s.around_second(1'600'000'000, 250'000'000);  // the same boundary: nothing new
  got.clear();
  while (auto n = s.next()) got.push_back(*n), s.take_due(*n);
  EXPECT_EQ(got, (std::vector<uint64_t>{1'747'000'000, 1'753'000'000, 1'760'000'000}));
}

// Candidates: the adjusting syscalls, and while a slew shows in the NTP state,
// every REALTIME second boundary as MONOTONIC.
TEST(ClockChangeCandidates, AdjustingCallsAndSecondsWhileSlewing) {
  std::vector<ClockPoint> pts;
  for (uint64_t m = 1'000'000'000; m <= 6'000'000'000; m += 100'000'000) {
    ClockPoint p{m * 2, m, 10, kClockHasRealtime};
    p.rt_minus_mono_ns = 400'000'000;  // REALTIME seconds fall at mono x.6 s
    pts.push_back(p);
  }
  std::vector<ClockAdjustment> adj{state_adj(1'000'000'000, STA_NANO, 0),
                                   syscall_adj(1'234'000'000, ADJ_FREQUENCY),
                                   syscall_adj(1'300'000'000, 0),  // a read: no candidate
                                   syscall_adj(1'400'000'000, ADJ_OFFSET | ADJ_STATUS),
                                   state_adj(1'500'000'000, STA_PLL | STA_NANO, 3'000'000),
                                   state_adj(2'000'000'000, STA_PLL | STA_NANO, 2'000'000),
                                   state_adj(3'800'000'000, STA_PLL | STA_NANO, 0)};
  TraceReader r = TraceReader::from_bytes(
      file_header_bytes() + bytes_of(encode_clock(pts)) +
      bytes_of(encode_json(FrameType::ClockAdjust, clock_adjust_frame_json(adj), uint32_t(adj.size()))));
  ASSERT_FALSE(r.error()) << r.error()->what();
  // Slewing from the point before 1.5 s (1.4 s) to 3.8 s: boundaries at 1.6, 2.6, 3.6 s,
  // and 4.6 s, where the last chunk (taken at 3.6 s) comes out of the tick length.
  // A call spans its entry (1 us before its exit here) to one tick after its exit.
  const uint64_t tick = kChangeEffectNs;
  EXPECT_EQ(clock_change_candidates(r.clock_history()),
            (std::vector<ClockChange>{{1'233'999'000, 1'234'000'000 + tick},
                                      {1'399'999'000, 1'400'000'000 + tick},
                                      {1'600'000'000, 1'600'000'000 + tick},
                                      {2'600'000'000, 2'600'000'000 + tick},
                                      {3'600'000'000, 3'600'000'000 + tick},
                                      {4'600'000'000, 4'600'000'000 + tick}}));
}

// A slew cut short leaves its last chunk in the tick length until the next
// REALTIME second: every adjusting call, and the recording's start, make that
// boundary a candidate even when no NTP state shows a slew. An ADJ_OFFSET call
// makes the one after it a candidate too: an adjtime() offset of up to 500 us
// goes in whole at the first and comes out at the second, between two points.
TEST(ClockChangeCandidates, TheBoundaryAfterACallAndAfterTheStart) {
  std::vector<ClockPoint> pts;
  for (uint64_t m = 1'000'000'000; m <= 4'000'000'000; m += 100'000'000) {
    ClockPoint p{m * 2, m, 10, kClockHasRealtime};
    p.rt_minus_mono_ns = 250'000'000;  // REALTIME seconds fall at mono x.75 s
    p.rt_width_ns = 40;
    pts.push_back(p);
  }
  std::vector<ClockAdjustment> adj{syscall_adj(2'300'000'000, ADJ_OFFSET | ADJ_STATUS)};
  TraceReader r = TraceReader::from_bytes(
      file_header_bytes() + bytes_of(encode_clock(pts)) +
      bytes_of(encode_json(FrameType::ClockAdjust, clock_adjust_frame_json(adj), uint32_t(adj.size()))));
  ASSERT_FALSE(r.error()) << r.error()->what();
  const uint64_t tick = kChangeEffectNs;
  EXPECT_EQ(clock_change_candidates(r.clock_history()),
            (std::vector<ClockChange>{{1'749'999'960, 1'749'999'960 + tick},  // after the start
                                      {2'299'999'000, 2'300'000'000 + tick},  // the call
                                      {2'749'999'960, 2'749'999'960 + tick},  // after the call
                                      {3'749'999'960, 3'749'999'960 + tick}}))  // an adjtime()'s return
      << "each boundary from the reading's upper end (40 ns wide)";
}

// An adjtime() slew of 1.2 ms (issue 35, item 4): chunks of 500, 500 and 200 us
// at three REALTIME seconds, then the base rate back at the fourth, one second
// after the states began to read "no slew left", with no call: that boundary is
// a candidate. Each boundary is one candidate, though the points read
// REALTIME - MONOTONIC a few ns differently (one boundary counted twice would
// leave its windows crowded).
TEST(ClockChangeCandidates, AdjtimeSlewEndsOneSecondAfterItsLastChunk) {
  std::vector<ClockPoint> pts;
  for (uint64_t m = 1'000'000'000; m <= 6'000'000'000; m += 100'000'000) {
    ClockPoint p{m * 2, m, 10, kClockHasRealtime};
    p.rt_minus_mono_ns = 400'000'000 - int64_t(m / 100'000'000 % 3) * 10;  // REALTIME seconds at mono ~x.6 s
    p.rt_width_ns = 40;
    pts.push_back(p);
  }
  auto left = [](uint64_t mono, int64_t us) {
    ClockAdjustment a = state_adj(mono, STA_NANO, 0);
    a.state.adjtime_left_us = us;
    return a;
  };
  std::vector<ClockAdjustment> adj{left(1'000'000'000, 0),    syscall_adj(1'250'000'000, ADJ_OFFSET_SINGLESHOT),
                                   left(1'300'000'000, 1200), left(1'700'000'000, 700),
                                   left(2'700'000'000, 200),  left(3'700'000'000, 0)};
  TraceReader r = TraceReader::from_bytes(
      file_header_bytes() + bytes_of(encode_clock(pts)) +
      bytes_of(encode_json(FrameType::ClockAdjust, clock_adjust_frame_json(adj), uint32_t(adj.size()))));
  ASSERT_FALSE(r.error()) << r.error()->what();
  std::vector<ClockChange> c = clock_change_candidates(r.clock_history());
  ASSERT_EQ(c.size(), 5u) << "the call, the three chunks' seconds and the one after the last chunk";
  EXPECT_EQ(c[0], (ClockChange{1'249'999'000, 1'250'000'000 + kChangeEffectNs}));
  for (size_t i = 1; i < c.size(); i++) {
    const uint64_t b = 600'000'000 + i * 1'000'000'000;  // the boundary, from the readings' upper ends
    EXPECT_GE(c[i].from_ns, b - 40) << i;
    EXPECT_LE(c[i].from_ns, b - 20) << i;
    EXPECT_LE(c[i].to_ns, b - 20 + kChangeEffectNs) << i;
    EXPECT_GE(c[i].to_ns, b - 40 + kChangeEffectNs) << i;
  }
  // The end's windows hold one witnessed change: checked by the model, not crowded.
  EXPECT_EQ(r.clock_map().model_stats().crowded, 0u);
}

// A watch that dropped call records leaves changes nobody saw: every segment
// falls back to the monotonic bound (counted as crowded), never a guess.
TEST(ClockChangeCandidates, DroppedCallRecordsLeaveNoWindowChecked) {
  std::vector<ClockPoint> pts;
  for (uint64_t m = 1'000'000'000; m <= 2'000'000'000; m += 100'000'000) pts.push_back({m * 2, m, 10, 0});
  std::string bytes = file_header_bytes() + bytes_of(encode_clock(pts));
  TraceReader seen = TraceReader::from_bytes(bytes, {{"clock_discipline", {{"syscalls_dropped", 0}}}});
  TraceReader lost = TraceReader::from_bytes(bytes, {{"clock_discipline", {{"syscalls_dropped", 3}}}});
  ASSERT_FALSE(seen.error() || lost.error());
  EXPECT_TRUE(clock_change_candidates(seen.clock_history()).empty());
  EXPECT_EQ(clock_change_candidates(lost.clock_history()).size(), 2u);
  EXPECT_EQ(seen.clock_map().model_stats().crowded, 0u);
  EXPECT_EQ(lost.clock_map().model_stats().crowded, pts.size() - 1);
  TscBounds b = lost.clock_map().mono_to_tsc_bounds(1'450'000'000);  // inside [1.4 s, 1.5 s]
  EXPECT_LE(b.lo, 2'800'000'000u);
  EXPECT_GE(b.hi, 3'000'000'000u) << "the assumption-free bound: the whole segment";
}

// A damaged trace whose points lie centuries apart while a slew shows costs no
// more than its points: at most the first two and the last boundary per gap (the
// model only asks whether a window holds two or more), found by fuzzing as an
// out-of-memory.
TEST(ClockChangeCandidates, FarApartPointsGiveAFewBoundariesPerGap) {
  std::vector<ClockPoint> pts;
  for (uint64_t m : {1'000'000'000ull, 1'500'000'000ull, 4'000'000'000'000'000'000ull, 9'000'000'000'000'000'000ull}) {
    ClockPoint p{m, m, 10, kClockHasRealtime};
    p.rt_minus_mono_ns = 400'000'000;
    pts.push_back(p);
  }
  std::vector<ClockAdjustment> adj{state_adj(1'200'000'000, STA_PLL | STA_NANO, 3'000'000)};
  TraceReader r = TraceReader::from_bytes(
      file_header_bytes() + bytes_of(encode_clock(pts)) +
      bytes_of(encode_json(FrameType::ClockAdjust, clock_adjust_frame_json(adj), uint32_t(adj.size()))));
  ASSERT_FALSE(r.error()) << r.error()->what();
  std::vector<uint64_t> c;
  for (const ClockChange& x : clock_change_candidates(r.clock_history())) c.push_back(x.from_ns);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0], 1'600'000'000u) << "none between 1 s and 1.5 s; the first two after 1.5 s";
  EXPECT_EQ(c[1], 2'600'000'000u);
  EXPECT_EQ(c[2], 3'999'999'999'600'000'000u) << "the last boundary before the third point";
  EXPECT_EQ(c[3], 4'000'000'000'600'000'000u);
  EXPECT_EQ(c[4], 4'000'000'001'600'000'000u);
  EXPECT_EQ(c[5], 8'999'999'999'600'000'000u);
}

}  // namespace
}  // namespace cptrace

namespace cptrace {
namespace {

// A System.nanoTime() read inside a time namespace is that namespace's
// CLOCK_MONOTONIC: the reader takes the process's offset (Processes frame) off
// before converting, or, where the offset is unknown, bounds it by nothing.
TEST(TimeNamespace, NanoTimeInATimeNamespaceConvertsThroughItsOffset) {
  std::vector<ClockPoint> pts;
  for (uint64_t m = 1'000'000'000; m <= 3'000'000'000; m += 100'000'000) pts.push_back({m * 2, m, 10, 0});
  auto mono_event = [](uint32_t pid, uint64_t ns) {
    TraceEvent e;
    e.ts = ns, e.pid = e.tid = pid, e.channel = 7, e.tuple = pid;
    e.kind = uint8_t(EventKind::User), e.timebase = uint8_t(Timebase::MonoNs);
    return e;
  };
  const int64_t off = 1000'000'000'000;  // `unshare --time --monotonic 1000`
  std::vector<PidEntry> ents{{100, 1, 5, off, false}, {200, 2, 5, 0, true}};
  std::vector<TraceEvent> evs{mono_event(100, 2'000'000'000 + off), mono_event(200, 2'000'000'000),
                              mono_event(300, 2'000'000'000)};
  TraceReader r =
      TraceReader::from_bytes(file_header_bytes() + bytes_of(encode_clock(pts)) +
                              bytes_of(encode_json(FrameType::Processes, pid_frame_json(4, ents).dump(), 2)) +
                              bytes_of(encode_events(evs.data(), evs.size())));
  ASSERT_FALSE(r.error()) << r.error()->what();
  std::map<uint32_t, TraceEvent> got;
  r.for_each_event([&](const TraceEvent& e) { got[e.pid] = e; });
  ASSERT_EQ(got.size(), 3u);
  auto holds = [](const TraceEvent& e, uint64_t t) { return e.ts - e.ts_err <= t && t <= e.ts + e.ts_err; };
  EXPECT_TRUE(holds(got[100], 4'000'000'000)) << "in the namespace: its offset taken off";
  EXPECT_TRUE(holds(got[300], 4'000'000'000)) << "on the host";
  EXPECT_LT(got[100].ts_err, 1000u);
  EXPECT_GE(got[200].ts_err, UINT64_MAX / 4) << "offset unknown: no bound claimed";
}

}  // namespace
}  // namespace cptrace
