// Net frames: codec round trip, hostile headers and payloads, and TraceReader's
// for_each_net_event (TSC conversion through the clock map, truncation and
// corruption reported at the byte offset of the bad frame, memory per frame).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "trace/net_codec.h"
#include "analyze/net_throughput.h"
#include "trace/trace_reader.h"

namespace cptrace {
namespace {

std::vector<cp_net_rec> some_recs(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<cp_net_rec> v(n);
  uint64_t t = 5'000'000'000ull;
  for (size_t i = 0; i < n; ++i) {
    cp_net_rec& r = v[i];
    std::memset(&r, 0, sizeof r);
    r.ktime_ns = t += 1000 + rng() % 5000;
    r.kind = uint8_t(CP_NET_SOCK_SEND + rng() % 4);
    r.family = rng() & 1 ? 2 : 10;
    for (auto& b : r.saddr) b = uint8_t(rng());
    for (auto& b : r.daddr) b = uint8_t(rng());
    r.proto = rng() & 1 ? 6 : 17;
    r.sport = uint16_t(rng());
    r.dport = uint16_t(rng());
    r.seq = uint32_t(rng());
    r.ack = uint32_t(rng());
    r.len = uint32_t(rng() % 65536);
    r.hash = uint32_t(rng());
    r.netns = 4026531840u + uint32_t(rng() % 8);
    r.ifindex = uint32_t(rng() % 4);
    r.pid = uint32_t(rng());
    r.tid = uint32_t(rng());
    r.cpu = uint16_t(rng() % 8);
    r.gso_segs = uint16_t(rng() % 3);
    r.gso_size = uint16_t(rng() % 1500);
    r.tcp_flags = uint8_t(rng());
    r.cgroup = rng();
  }
  return v;
}

std::string bytes_of(const EncodedFrame& f) {
  std::string s(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr);
  s.append(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
  return s;
}

// A file: header, two clock points (TSC = 2 * mono + 7), then the given frames.
// offsets[i] is where frame i starts.
std::string file_with(const std::vector<EncodedFrame>& frames, std::vector<uint64_t>* offsets = nullptr,
                      bool clock = true) {
  std::string b = file_header_bytes();
  if (clock) {
    std::vector<ClockPoint> pts = {{2 * 1'000'000'000ull + 7, 1'000'000'000ull, 10, 0},
                                   {2 * 100'000'000'000ull + 7, 100'000'000'000ull, 10, 0}};
    b += bytes_of(encode_clock(pts));
  }
  for (const auto& f : frames) {
    if (offsets) offsets->push_back(b.size());
    b += bytes_of(f);
  }
  return b;
}

bool same(const cp_net_rec& a, const cp_net_rec& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(NetCodec, RoundTripCompressedAndStored) {
  auto recs = some_recs(3000, 1);
  for (int level : {0, 1, 3}) {
    EncodedFrame f = encode_net(recs.data(), recs.size(), level);
    EXPECT_EQ(f.hdr.type, uint16_t(FrameType::Net2));
    EXPECT_EQ(f.hdr.count, recs.size());
    EXPECT_EQ(f.hdr.raw_len, recs.size() * sizeof(cp_net_rec));
    std::vector<cp_net_rec> out;
    decode_net_into(f.hdr, f.payload.data(), f.payload.size(), out);
    ASSERT_EQ(out.size(), recs.size());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(same(out[i], recs[i])) << i;
  }
}

// A Net frame of version 1 (96-byte records, before the cgroup id): every
// field read as written, the cgroup 0.
TEST(NetCodec, VersionOneFramesReadWithoutCgroup) {
  auto recs = some_recs(500, 3);
  std::string raw;
  for (const cp_net_rec& r : recs) raw.append(reinterpret_cast<const char*>(&r), kNetRecV1Bytes);
  for (int level : {0, 1}) {
    EncodedFrame f;
    finish_frame(f, FrameType::Net, reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), uint32_t(recs.size()),
                 level);
    std::vector<cp_net_rec> out;
    decode_net_into(f.hdr, f.payload.data(), f.payload.size(), out);
    ASSERT_EQ(out.size(), recs.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i].cgroup, 0u) << i;
      out[i].cgroup = recs[i].cgroup;
      ASSERT_TRUE(same(out[i], recs[i])) << i;
    }
    f.hdr.raw_len = uint32_t(recs.size() * sizeof(cp_net_rec));  // a version 2 length on a version 1 frame
    EXPECT_THROW(decode_net_into(f.hdr, f.payload.data(), f.payload.size(), out), std::runtime_error);
  }
}

TEST(NetCodec, HostileFramesAreRejected) {
  auto recs = some_recs(10, 2);
  std::vector<cp_net_rec> out;
  auto rejected = [&](EncodedFrame f) {
    EXPECT_THROW(decode_net_into(f.hdr, f.payload.data(), f.payload.size(), out), std::runtime_error);
  };
  EncodedFrame good = encode_net(recs.data(), recs.size(), 0);
  EncodedFrame f = good;
  f.hdr.count = 11;  // raw_len no longer count * 104
  rejected(f);
  f = good;
  f.hdr.raw_len -= 1;
  rejected(f);
  f = good;
  f.hdr.count = kMaxFrameEvents + 1;
  f.hdr.raw_len = 0;
  rejected(f);
  f = good;
  f.hdr.type = uint16_t(FrameType::Events);
  rejected(f);
  f = good;
  f.payload.pop_back();  // payload shorter than the header says
  rejected(f);
  recs[3].kind = 9;
  rejected(encode_net(recs.data(), recs.size(), 1));
  recs[3].kind = CP_NET_PKT_RX;
  recs[4].family = 1;
  rejected(encode_net(recs.data(), recs.size(), 1));
  EXPECT_THROW(encode_net(recs.data(), kMaxFrameEvents + 1, 1), std::invalid_argument);
}

TEST(NetReader, EventsInFileOrderWithTscTimestamps) {
  auto a = some_recs(500, 3), b = some_recs(700, 4);
  std::string file = file_with({encode_net(a.data(), a.size()), encode_net(b.data(), b.size())});
  TraceReader r = TraceReader::from_bytes(file);
  ASSERT_FALSE(r.error());
  EXPECT_EQ(r.net_event_count(), 1200u);
  EXPECT_EQ(r.net_frame_count(), 2u);
  EXPECT_EQ(r.event_count(), 0u);
  std::vector<NetEvent> got;
  r.for_each_net_event([&](const NetEvent& e) { got.push_back(e); });
  ASSERT_EQ(got.size(), 1200u);
  for (size_t i = 0; i < got.size(); ++i) {
    const cp_net_rec& want = i < 500 ? a[i] : b[i - 500];
    ASSERT_TRUE(same(got[i].r, want)) << i;
    EXPECT_EQ(got[i].ts, 2 * want.ktime_ns + 7) << "ts must come from the clock map";
  }
}

TEST(NetReader, TruncationAndCorruptionReportTheFrameOffset) {
  auto a = some_recs(100, 5), b = some_recs(100, 6);
  std::vector<uint64_t> off;
  std::string file = file_with({encode_net(a.data(), a.size()), encode_net(b.data(), b.size())}, &off);
  // Cut inside the second frame: the first survives, the error names the second.
  for (uint64_t cut : {off[1] + 3, off[1] + sizeof(FrameHeader) + 10, uint64_t(file.size() - 1)}) {
    TraceReader r = TraceReader::from_bytes(file.substr(0, cut));
    ASSERT_TRUE(r.error());
    EXPECT_EQ(r.error()->offset(), off[1]) << r.error()->what();
    EXPECT_EQ(r.net_event_count(), 100u);
    uint64_t n = 0;
    r.for_each_net_event([&](const NetEvent&) { ++n; });
    EXPECT_EQ(n, 100u);
  }
  // One flipped payload byte of the first frame: CRC mismatch at its offset, nothing after it.
  std::string bad = file;
  bad[off[0] + sizeof(FrameHeader) + 5] ^= 0x40;
  TraceReader r = TraceReader::from_bytes(bad);
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->offset(), off[0]);
  EXPECT_NE(std::string(r.error()->what()).find("CRC"), std::string::npos);
  EXPECT_EQ(r.net_event_count(), 0u);
  // A CRC-valid frame whose records are garbage: "undecodable net (version 2) frame" at its offset.
  a[7].family = 0;
  std::vector<uint64_t> off2;
  TraceReader r2 =
      TraceReader::from_bytes(file_with({encode_net(b.data(), b.size()), encode_net(a.data(), a.size())}, &off2));
  ASSERT_TRUE(r2.error());
  EXPECT_EQ(r2.error()->offset(), off2[1]);
  EXPECT_NE(std::string(r2.error()->what()).find("undecodable net (version 2) frame"), std::string::npos)
      << r2.error()->what();
  EXPECT_EQ(r2.net_event_count(), 100u);
}

TEST(NetReader, KernelTimestampsWithoutClockPointsAreAnError) {
  auto a = some_recs(10, 7);
  std::vector<uint64_t> off;
  TraceReader r = TraceReader::from_bytes(file_with({encode_net(a.data(), a.size())}, &off, false));
  ASSERT_FALSE(r.error());
  try {
    r.for_each_net_event([](const NetEvent&) {});
    FAIL() << "converted kernel timestamps without a clock map";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.offset(), off[0]);
  }
}

TEST(NetReader, CountersFrameCarriesNetCounts) {
  std::string file = file_with(
      {encode_json(FrameType::Counters, R"({"seen":[1,2],"dropped":[0,0],"net":{"seen":[5,6],"dropped":[1,0]}})", 1)});
  TraceReader r = TraceReader::from_bytes(file);
  ASSERT_FALSE(r.error());
  EXPECT_EQ(r.counters().total_seen(), 3u);
  EXPECT_EQ(r.net_counters().total_seen(), 11u);
  EXPECT_EQ(r.net_counters().total_dropped(), 1u);
  TraceReader bad = TraceReader::from_bytes(file_with({encode_json(FrameType::Counters, R"({"net":[1]})", 1)}));
  ASSERT_TRUE(bad.error());
}

}  // namespace
}  // namespace cptrace

namespace cptrace {
namespace {
// Run by hand (--gtest_also_run_disabled_tests) to refresh the fuzz seed with Net2
// frames (net-frames.cpt keeps the version 1 frames recorders wrote before).
TEST(NetFuzzSeed, DISABLED_Write) {
  auto a = some_recs(20, 8);
  std::string file = file_with({encode_net(a.data(), 12, 1), encode_net(a.data() + 12, 8, 0)});
  std::ofstream(std::string(getenv("SEED_DIR") ? getenv("SEED_DIR") : ".") + "/net2-frames.cpt", std::ios::binary)
      << file;
}
}  // namespace
}  // namespace cptrace

// ---- throughput --net: application bytes per period per connection --------------------

namespace cptrace {
namespace {

cp_net_rec sock_event(uint8_t kind, uint64_t mono, uint32_t len, uint16_t lport, uint16_t rport, bool v6 = false) {
  cp_net_rec r;
  std::memset(&r, 0, sizeof r);
  r.ktime_ns = mono;
  r.kind = kind;
  r.family = v6 ? 10 : 2;
  r.proto = v6 ? 17 : 6;
  if (v6) {
    r.saddr[15] = 1;
    r.daddr[15] = 2;
  } else {
    r.saddr[0] = 10, r.saddr[3] = 1;
    r.daddr[0] = 10, r.daddr[3] = 2;
  }
  r.sport = lport;
  r.dport = rport;
  r.len = len;
  return r;
}

TEST(NetThroughput, BytesPerPeriodPerConnectionAndDirection) {
  const uint64_t t0 = 1'000'000'000ull, ms = 1'000'000ull;  // mono ns; origin = first clock point
  std::vector<cp_net_rec> recs = {
      sock_event(CP_NET_SOCK_SEND, t0 + 1 * ms, 100, 5000, 7000),
      sock_event(CP_NET_SOCK_RECV, t0 + 2 * ms, 50, 5000, 7000),
      sock_event(CP_NET_PKT_TX, t0 + 3 * ms, 999, 5000, 7000),  // packets are not application bytes
      sock_event(CP_NET_SOCK_SEND, t0 + 5 * ms, 200, 5000, 7000),
      sock_event(CP_NET_SOCK_SEND, t0 + 15 * ms, 300, 5000, 7000),
      sock_event(CP_NET_SOCK_SEND, t0 + 35 * ms, 400, 5000, 7000),
      sock_event(CP_NET_SOCK_RECV, t0 + 12 * ms, 64, 9000, 9001, true),
  };
  TraceReader r = TraceReader::from_bytes(file_with({encode_net(recs.data(), recs.size(), 1)}),
                                          {{"tsc_hz", 2e9}, {"start", {{"tsc", 2 * t0 + 7}}}});
  Timeline tl = trace_timeline(r);
  NetThroughput t = compute_net_throughput(r, tl, period_ticks(tl, 10, "--period"), 10);
  ASSERT_EQ(t.series.size(), 3u);
  EXPECT_EQ(t.first, 0);
  const ConnectionSeries& recv4 = t.series[0];
  const ConnectionSeries& send4 = t.series[1];
  const ConnectionSeries& recv6 = t.series[2];
  EXPECT_EQ(send4.connection, "tcp 10.0.0.1:5000 <-> 10.0.0.2:7000");
  EXPECT_EQ(send4.direction, "send");
  EXPECT_EQ(recv4.direction, "recv");
  EXPECT_EQ(recv6.connection, "udp [::1]:9000 <-> [::2]:9001");
  ASSERT_GE(t.periods, 4u);
  EXPECT_EQ(send4.bytes[0], 300u);
  EXPECT_EQ(send4.bytes[1], 300u);
  EXPECT_EQ(send4.bytes[2], 0u);
  EXPECT_EQ(send4.bytes[3], 400u);
  EXPECT_EQ(send4.total, 1000u);
  EXPECT_EQ(send4.calls, 4u);
  EXPECT_EQ(recv4.total, 50u);
  EXPECT_EQ(recv4.bytes[0], 50u);
  EXPECT_EQ(recv6.bytes[1], 64u);
  EXPECT_EQ(net_throughput_json(t)["connections"][1]["total_bytes"], 1000u);
}

TEST(NetThroughput, TraceWithoutNetworkEventsIsAnError) {
  TraceReader r = TraceReader::from_bytes(file_with({}), {{"tsc_hz", 2e9}, {"start", {{"tsc", 2'000'000'007ull}}}});
  Timeline tl = trace_timeline(r);
  try {
    compute_net_throughput(r, tl, period_ticks(tl, 10, "--period"), 10);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no network events"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cptrace
