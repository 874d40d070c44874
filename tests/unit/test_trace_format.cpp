// Trace format: codec round trips, hostile frames, writer -> reader, truncation
// and corruption of every byte of a small file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include <zlib.h>

#include <fmt/format.h>

#include "os/say.h"
#include "trace/block_codec.h"
#include "trace/events2_codec.h"
#include "trace/events_frame_check.h"
#include "trace/trace_reader.h"
#include "trace/trace_timeline.h"
#include "trace/trace_writer.h"

namespace cptrace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

std::vector<TraceEvent> random_events(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TraceEvent> ev(n);
  for (auto& e : ev) {
    e.ts = rng();
    e.channel = rng();
    e.tuple = rng();
    e.pid = static_cast<uint32_t>(rng());
    e.tid = static_cast<uint32_t>(rng());
    e.cpu = static_cast<uint16_t>(rng());
    e.kind = static_cast<uint8_t>(rng());
    e.timebase = static_cast<uint8_t>(rng() & 1);
  }
  return ev;
}

// Shaped like a recording: a few threads, each with its own pid/tid/cpu, logging
// alternately on a few hashed channels with increasing tuple ids, in per-CPU runs.
std::vector<TraceEvent> recording_like(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t chan[3] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull};
  uint64_t ts[4] = {1000000000000ull, 1000000000100ull, 1000000000200ull, 1000000000300ull};
  uint64_t tuple[4] = {0, 1000000, 2000000, 3000000};
  std::vector<TraceEvent> ev;
  while (ev.size() < n) {
    int t = static_cast<int>(rng() % 4);
    for (int k = 0; k < 64 && ev.size() < n; ++k) {
      TraceEvent e;
      ts[t] += 870 + rng() % 64;
      e.ts = ts[t];
      e.channel = chan[k % 3];
      e.tuple = tuple[t] += (k % 3 == 0);
      e.pid = 4242;
      e.tid = 4243 + t;
      e.cpu = static_cast<uint16_t>(t);
      e.kind = 1;
      ev.push_back(e);
    }
  }
  return ev;
}

std::vector<TraceEvent> round_trip(const std::vector<TraceEvent>& ev, int level = 1) {
  EncodedFrame f = encode_events(ev.data(), ev.size(), level);
  EXPECT_TRUE(frame_crc_ok(f.hdr, f.payload.data(), f.payload.size()));
  EXPECT_EQ(frame_header_problem(f.hdr), nullptr);
  return decode_events(f.hdr, f.payload.data(), f.payload.size());
}

// Re-seals a frame after a test changed its header or payload, so that only the
// decoder (not the CRC) can object.
void reseal(EncodedFrame& f) {
  f.hdr.payload_len = static_cast<uint32_t>(f.payload.size());
  f.hdr.crc32 = frame_crc(f.hdr, f.payload.data(), f.payload.size());
}

// ---- codec --------------------------------------------------------------------------------

TEST(BlockCodec, RoundTripRandom) {
  for (size_t n : {0, 1, 2, 17, 1000, 20000}) {
    auto ev = random_events(n, n);
    EXPECT_EQ(round_trip(ev), ev) << n;
    EXPECT_EQ(round_trip(ev, 0), ev) << n;
    EXPECT_EQ(round_trip(ev, 19), ev) << n;
  }
}

// Frames of version 1, as recorders wrote them before Events2, still read.
TEST(BlockCodec, VersionOneFramesStillDecode) {
  for (size_t n : {0, 1, 33, 5000}) {
    for (const auto& ev : {random_events(n, n + 3), recording_like(n, n + 4)}) {
      EncodedFrame f;
      encode_events_version1(ev.data(), ev.size(), 1, f);
      ASSERT_EQ(f.hdr.type, uint16_t(FrameType::Events));
      EXPECT_EQ(decode_events(f.hdr, f.payload.data(), f.payload.size()), ev) << n;
    }
  }
}

// Constant steps (tuple ids counting up, a steady stamp rate, one thread on
// one channel) cost a group of 32 events a few bytes per column, not a byte
// per value, before zstd; a group whose steps differ keeps its values.
TEST(BlockCodec, ConstantStepsCostNoBytesPerEvent) {
  std::vector<TraceEvent> ev(16384);
  for (size_t i = 0; i < ev.size(); ++i) {
    ev[i].ts = 5'000'000'000ull + 100 * i;
    ev[i].channel = 0x9e3779b97f4a7c15ull;
    ev[i].tuple = 77 + i;
    ev[i].pid = ev[i].tid = 4242;
    ev[i].kind = uint8_t(EventKind::User);
  }
  EncodedFrame f = encode_events(ev.data(), ev.size(), 0);
  ASSERT_EQ(f.hdr.type, uint16_t(FrameType::Events2));
  EXPECT_LT(f.payload.size(), ev.size() / 4);
  EXPECT_EQ(decode_events(f.hdr, f.payload.data(), f.payload.size()), ev);
  ev[7000].ts += 3;  // steps of 103 and 97 in one group of ts: its 32 values at one byte
  EncodedFrame g = encode_events(ev.data(), ev.size(), 0);
  EXPECT_EQ(g.payload.size(), f.payload.size() - 3 + 1 + 32);  // marker and varint 200 out
  EXPECT_EQ(decode_events(g.hdr, g.payload.data(), g.payload.size()), ev);
}

TEST(BlockCodec, EdgeValues) {
  std::vector<TraceEvent> ev;
  const uint64_t vals[] = {0, 1, kMax64, kMax64 - 1, 0, uint64_t{1} << 63, 5, 4, 3, 0, kMax64};
  for (uint64_t v : vals) {
    TraceEvent e;
    e.ts = v;  // includes decreasing runs and full-range jumps both ways
    e.channel = v;
    e.tuple = kMax64 - v;
    e.pid = static_cast<uint32_t>(v);
    e.tid = static_cast<uint32_t>(~v);
    e.cpu = static_cast<uint16_t>(v);
    e.kind = static_cast<uint8_t>(v);
    e.timebase = static_cast<uint8_t>(v & 1);
    ev.push_back(e);
  }
  EXPECT_EQ(round_trip(ev), ev);
  EXPECT_EQ(round_trip(ev, 0), ev);
}

TEST(BlockCodec, ManyChannels) {
  auto ev = random_events(5000, 7);
  for (size_t i = 0; i < ev.size(); ++i) ev[i].channel = (i * 7919) % 300;  // beyond the linear table
  EXPECT_EQ(round_trip(ev), ev);
}

// Events whose every field comes in runs of 1 to 40 equal values (across the
// encoder's eight-value run checks), each new value a small step, a jump or an
// extreme, over `nchan` channels.
std::vector<TraceEvent> run_shaped(size_t n, uint64_t seed, uint64_t nchan) {
  std::mt19937_64 rng(seed);
  auto next = [&](uint64_t prev) -> uint64_t {
    switch (rng() % 4) {
      case 0:
        return prev + 1 + rng() % 200;
      case 1:
        return prev - rng() % 70;
      case 2:
        return rng();
      default:
        return rng() % 2 ? 0 : ~uint64_t{0};
    }
  };
  uint64_t val[6] = {}, left[6] = {};
  std::vector<TraceEvent> ev(n);
  for (auto& e : ev) {
    for (int f = 0; f < 6; ++f) {
      if (left[f] == 0) {
        left[f] = 1 + rng() % 40;
        val[f] = f == 1 ? (rng() % nchan) * 0x9e3779b97f4a7c15ull : next(val[f]);
      }
      --left[f];
    }
    e.ts = val[0];
    e.channel = val[1];
    e.tuple = val[2];
    e.pid = static_cast<uint32_t>(val[3]);
    e.tid = static_cast<uint32_t>(val[4]);
    e.cpu = static_cast<uint16_t>(val[5]);
    e.kind = static_cast<uint8_t>(rng() % 3);
    e.timebase = static_cast<uint8_t>(val[5] & 1);
  }
  return ev;
}

RecordedEvents as_recorded(const std::vector<TraceEvent>& ev) {
  RecordedEvents c;
  for (const TraceEvent& e : ev) c.push_back(e);
  return c;
}

// The recorder encodes its blocks (runs kept as records arrive), the rest
// TraceEvent rows (runs found row by row): the same events must give the same
// frame.
TEST(BlockCodec, RecordedEventsEncodeTheSameBytesAsRows) {
  for (uint64_t nchan : {1, 3, 100, 300})
    for (uint64_t seed = 1; seed <= 12; ++seed)
      for (int level : {0, 1, -5}) {
        auto ev = run_shaped(1 + seed * 997 % 5000, seed * 77 + nchan, nchan);
        EncodedFrame rows = encode_events(ev.data(), ev.size(), level), cols;
        encode_recorded_into(as_recorded(ev), level, cols);
        ASSERT_EQ(std::memcmp(&rows.hdr, &cols.hdr, sizeof rows.hdr), 0) << nchan << " " << seed << " " << level;
        ASSERT_EQ(rows.payload, cols.payload) << nchan << " " << seed << " " << level;
        ASSERT_EQ(decode_events(cols.hdr, cols.payload.data(), cols.payload.size()), ev);
      }
}

// The uncompressed payloads of fixed events: the formats do not move. Version
// 1 as recorders wrote it (these sums predate Events2), version 2 as written
// when it was introduced.
TEST(BlockCodec, EventsPayloadBytesArePinned) {
  const std::tuple<uint64_t, uint32_t, uint32_t> want[] = {
      {3, 0xd2047b45, 0xabd3de17}, {100, 0x0e4c9ccf, 0x1ddfda00}, {300, 0xa9ef5f33, 0x2ed7fcf8}};
  for (auto [nchan, v1_want, v2_want] : want) {
    uLong v1 = crc32(0, nullptr, 0), v2 = v1;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      auto ev = run_shaped(100 + seed * 331, seed * 1000 + nchan, nchan);
      EncodedFrame f;
      encode_events_version1(ev.data(), ev.size(), 0, f);
      v1 = crc32(v1, f.payload.data(), static_cast<uInt>(f.payload.size()));
      encode_recorded_into(as_recorded(ev), 0, f);
      v2 = crc32(v2, f.payload.data(), static_cast<uInt>(f.payload.size()));
    }
    EXPECT_EQ(v1, v1_want) << nchan << " channels";
    EXPECT_EQ(v2, v2_want) << nchan << " channels";
  }
}

TEST(BlockCodec, LevelZeroStoresUncompressed) {
  auto ev = recording_like(1000, 1);
  EXPECT_EQ(encode_events(ev.data(), ev.size(), 0).hdr.flags, 0);
  EXPECT_EQ(encode_events(ev.data(), ev.size(), 1).hdr.flags, kFrameZstd);
}

TEST(BlockCodec, RecordingLikeDataCompressesTenfold) {
  auto ev = recording_like(16384, 2);
  EncodedFrame f = encode_events(ev.data(), ev.size());
  // against 32 bytes per event (the fields, without the struct's tail padding)
  double ratio = double(ev.size() * 32) / double(f.payload.size() + sizeof f.hdr);
  EXPECT_GE(ratio, 10.0);
  EXPECT_EQ(decode_events(f.hdr, f.payload.data(), f.payload.size()), ev);
}

TEST(BlockCodec, RefusesTooManyEvents) {
  TraceEvent e;
  EXPECT_THROW(encode_events(&e, kMaxFrameEvents + 1), std::invalid_argument);
}

TEST(BlockCodec, ClockAndJsonRoundTrip) {
  std::vector<ClockPoint> pts = {{1, 2, 3, 0}, {kMax64, kMax64, 0xffffffff, 0}};
  EncodedFrame c = encode_clock(pts);
  EXPECT_EQ(decode_clock(c.hdr, c.payload.data(), c.payload.size()), pts);
  EncodedFrame e = encode_clock({});
  EXPECT_TRUE(decode_clock(e.hdr, e.payload.data(), e.payload.size()).empty());
  std::string j = json::array({{{"id", 1}, {"name", std::string(500, 'x')}}}).dump();
  EncodedFrame f = encode_json(FrameType::Channels, j, 1);
  EXPECT_EQ(f.hdr.flags, kFrameZstd);  // repetitive enough to compress
  EXPECT_EQ(decode_json(f.hdr, f.payload.data(), f.payload.size()), j);
  EXPECT_THROW(encode_json(FrameType::Events, j, 1), std::invalid_argument);
}

void expect_rejected(const EncodedFrame& f) {
  EXPECT_THROW(decode_events(f.hdr, f.payload.data(), f.payload.size()), std::runtime_error);
}

TEST(BlockCodec, HostileHeaders) {
  auto ev = recording_like(100, 3);
  const EncodedFrame good = encode_events(ev.data(), ev.size());
  auto with = [&](auto change) {
    EncodedFrame f = good;
    change(f);
    reseal(f);
    return f;
  };
  expect_rejected(with([](EncodedFrame& f) { f.hdr.count = 0xffffffff; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.count = kMaxFrameEvents; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.count += 1; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.count -= 1; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.raw_len = 0xffffffff; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.raw_len = kMaxRawBytes; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.raw_len -= 1; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.flags = 0; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.flags = 3; }));
  expect_rejected(with([](EncodedFrame& f) { f.hdr.type = static_cast<uint16_t>(FrameType::Clock); }));
  expect_rejected(with([](EncodedFrame& f) { f.payload.pop_back(); }));
  expect_rejected(with([](EncodedFrame& f) { f.payload.push_back(0); }));
  // payload length disagreeing with the header
  EXPECT_THROW(decode_events(good.hdr, good.payload.data(), good.payload.size() - 1), std::runtime_error);
  // clock frame whose count does not match its bytes
  EncodedFrame c = encode_clock({{1, 2, 3, 0}});
  c.hdr.count = 0x10000000;
  EXPECT_THROW(decode_clock(c.hdr, c.payload.data(), c.payload.size()), std::runtime_error);
}

// Uncompressed column bytes given by hand, for decoder edge cases.
EncodedFrame raw_events_frame(std::vector<uint8_t> raw, uint32_t count, FrameType type = FrameType::Events) {
  EncodedFrame f;
  f.hdr.type = static_cast<uint16_t>(type);
  f.hdr.raw_len = static_cast<uint32_t>(raw.size());
  f.hdr.count = count;
  f.payload = std::move(raw);
  seal_frame(f.hdr, f.payload.data(), f.payload.size());
  return f;
}

TEST(BlockCodec, HostileColumns) {
  // nchan, one channel id, then ts chan tuple pid tid cpu kind timebase
  const std::vector<uint8_t> one_event = {1, 1, 0, 0, 0, 0, 0, 0, 0,  //
                                          0, 0, 0, 0, 0, 0, 1, 0};
  EncodedFrame ok = raw_events_frame(one_event, 1);
  ASSERT_EQ(decode_events(ok.hdr, ok.payload.data(), ok.payload.size()).size(), 1u);
  auto bad = [&](size_t i, uint8_t v) {
    auto raw = one_event;
    raw[i] = v;
    expect_rejected(raw_events_frame(raw, 1));
  };
  bad(0, 2);  // more channels than events
  bad(10, 1);  // channel index out of range
  bad(10, 0x80);  // varint running into the next column... and off the end
  bad(16, kLastTimebase + 1);  // unknown timebase
  bad(12, 0xff);  // pid continuing into the tid column... and off the end
  // a varint longer than 10 bytes, and one overflowing 64 bits
  std::vector<uint8_t> overlong = {0};
  overlong.insert(overlong.end(), 11, 0x80);
  overlong.insert(overlong.end(), {0, 0, 0, 0, 0, 0, 0, 0});
  expect_rejected(raw_events_frame(overlong, 1));
  std::vector<uint8_t> wide = {0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0};
  expect_rejected(raw_events_frame(wide, 1));
  // pid beyond 32 bits
  std::vector<uint8_t> big_pid = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0, 1, 0};
  expect_rejected(raw_events_frame(big_pid, 1));
}

TEST(BlockCodec, HostileEvents2Payloads) {
  // nchan, one channel id; one run: rows, pid, tid, cpu, kind, timebase; then
  // the width bytes of the ts, channel index and tuple groups (all width 0)
  const std::vector<uint8_t> one_event = {1, 1, 0, 0, 0, 0, 0, 0, 0,  //
                                          1, 1, 0, 0, 0, 1, 0,  //
                                          0, 0, 0};
  auto frame = [](std::vector<uint8_t> raw, uint32_t count) {
    return raw_events_frame(std::move(raw), count, FrameType::Events2);
  };
  EncodedFrame ok = frame(one_event, 1);
  std::vector<TraceEvent> got = decode_events(ok.hdr, ok.payload.data(), ok.payload.size());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].channel, 1u);
  EXPECT_EQ(got[0].kind, 1u);
  bool mono = true;
  EXPECT_TRUE(events_frame_decodes(ok.hdr, ok.payload.data(), ok.payload.size(), mono));
  EXPECT_FALSE(mono);
  EncodedFrame none = frame({0, 0}, 0);
  EXPECT_TRUE(decode_events(none.hdr, none.payload.data(), none.payload.size()).empty());

  auto expect_refused = [&](std::vector<uint8_t> raw, uint32_t count, const char* what) {
    EncodedFrame f = frame(std::move(raw), count);
    try {
      decode_events(f.hdr, f.payload.data(), f.payload.size());
      ADD_FAILURE() << "decoded: " << what;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    bool m = false;
    EXPECT_FALSE(events_frame_decodes(f.hdr, f.payload.data(), f.payload.size(), m)) << what;
  };
  auto with = [&](size_t i, uint8_t v) {
    auto raw = one_event;
    raw[i] = v;
    return raw;
  };
  expect_refused(with(0, 2), 1, "channel table size out of range");
  expect_refused(with(9, 2), 1, "run count out of range");
  expect_refused(with(10, 0), 1, "a run of no rows");
  expect_refused(with(10, 2), 1, "run rows out of range");
  expect_refused(with(15, kLastTimebase + 1), 1, "unknown timebase");
  expect_refused(with(16, 10), 1, "ts column: a group 10 bytes wide");
  expect_refused(with(17, 1), 1, "runs past the end");  // a value byte the tuple's width was
  auto index_same = one_event;  // every index the same value, beyond the table
  index_same[17] = kEvents2SameValue;
  index_same.insert(index_same.begin() + 18, 1);
  expect_refused(index_same, 1, "channel index out of range");
  auto trailing = one_event;
  trailing.push_back(0);
  expect_refused(trailing, 1, "trailing bytes");
  expect_refused(one_event, 2, "runs cover 1 of 2 events");
  expect_refused({1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, "channel table size out of range");
  expect_refused({0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1, "channel index without a channel table");
  // raw_len below what one event needs: refused before anything is decoded
  expect_refused({1, 1, 0, 0, 0, 0, 0, 0, 0, 0}, 1, "raw_len too small");
}

TEST(BlockCodec, ZstdBombIsBounded) {
  // A payload that decompresses to more than raw_len must be rejected, not grown into.
  std::vector<TraceEvent> ev(100000);
  EncodedFrame f = encode_events(ev.data(), ev.size());
  f.hdr.raw_len = 8 * 1000 + 1;
  f.hdr.count = 1000;
  reseal(f);
  expect_rejected(f);
}

TEST(FrameHeader, SealAndProblems) {
  EncodedFrame f = encode_json(FrameType::Counters, "{}", 1);
  EXPECT_EQ(f.hdr.magic, kFrameMagic);
  EXPECT_TRUE(frame_crc_ok(f.hdr, f.payload.data(), f.payload.size()));
  for (size_t byte = 0; byte < 20; ++byte) {
    FrameHeader h = f.hdr;
    reinterpret_cast<uint8_t*>(&h)[byte] ^= 0x10;
    EXPECT_FALSE(frame_crc_ok(h, f.payload.data(), f.payload.size())) << byte;
  }
  FrameHeader h = f.hdr;
  h.payload_len = kMaxPayloadBytes + 1;
  EXPECT_NE(frame_header_problem(h), nullptr);
  h = f.hdr;
  h.magic = 0;
  EXPECT_NE(frame_header_problem(h), nullptr);
  Counters c{{1, 2, 3}, {0, 4}};
  EXPECT_EQ(c.total_seen(), 6u);
  EXPECT_EQ(c.total_dropped(), 4u);
}

// ---- a small multi-frame file in memory -----------------------------------------------

struct SmallFile {
  std::string bytes;
  std::vector<uint64_t> frame_starts;  // plus the end of the file as the last entry
  std::vector<uint64_t> events_before;  // events in complete frames before frame i
};

SmallFile small_file() {
  SmallFile s;
  s.bytes = file_header_bytes();
  auto ev = recording_like(40, 4);
  for (size_t i = 0; i < 10; ++i) ev[i].timebase = static_cast<uint8_t>(Timebase::MonoNs);
  std::vector<EncodedFrame> frames;
  frames.push_back(encode_clock({{1000, 500, 20, 0}, {3000, 1500, 20, 0}}));
  frames.push_back(encode_json(FrameType::Channels, R"([{"id":1,"name":"in","pid":7}])", 1));
  frames.push_back(encode_events(ev.data(), 10, 0));
  frames.push_back(encode_events(ev.data() + 10, 30, 1));
  frames.push_back(encode_json(FrameType::Counters, R"({"seen":[40],"dropped":[0]})", 1));
  uint64_t events = 0;
  for (const EncodedFrame& f : frames) {
    s.frame_starts.push_back(s.bytes.size());
    s.events_before.push_back(events);
    s.bytes.append(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr);
    s.bytes.append(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
    if (f.hdr.type == static_cast<uint16_t>(FrameType::Events2)) events += f.hdr.count;
  }
  s.frame_starts.push_back(s.bytes.size());
  s.events_before.push_back(events);
  return s;
}

TEST(TraceReader, SmallFileReadsCompletely) {
  SmallFile s = small_file();
  TraceReader r = TraceReader::from_bytes(s.bytes);
  EXPECT_FALSE(r.error());
  EXPECT_EQ(r.frame_count(), 5u);
  EXPECT_EQ(r.event_count(), 40u);
  EXPECT_EQ(r.valid_bytes(), s.bytes.size());
  EXPECT_EQ(r.channel_name(1), "in");
  EXPECT_EQ(r.channel_name(0xabc), "0x0000000000000abc");
  EXPECT_EQ(r.counters().total_seen(), 40u);
  auto ev = r.events();
  ASSERT_EQ(ev.size(), 40u);
  for (const TraceEvent& e : ev) EXPECT_EQ(e.timebase, static_cast<uint8_t>(Timebase::Tsc));
}

TEST(TraceReader, TruncationAtEveryByte) {
  SmallFile s = small_file();
  for (size_t cut = 0; cut <= s.bytes.size(); ++cut) {
    std::string part = s.bytes.substr(0, cut);
    if (cut < kFileHeaderSize) {
      EXPECT_THROW(TraceReader::from_bytes(part), TraceError) << cut;
      continue;
    }
    TraceReader r = TraceReader::from_bytes(part);
    // complete frames: those ending at or before the cut
    size_t k = 0;
    while (k + 1 < s.frame_starts.size() && s.frame_starts[k + 1] <= cut) ++k;
    EXPECT_EQ(r.frame_count(), k) << cut;
    EXPECT_EQ(r.valid_bytes(), s.frame_starts[k]) << cut;
    EXPECT_EQ(r.event_count(), s.events_before[k]) << cut;
    EXPECT_EQ(r.events().size(), s.events_before[k]) << cut;
    if (cut == s.frame_starts[k]) {
      EXPECT_FALSE(r.error()) << cut;
    } else {
      ASSERT_TRUE(r.error()) << cut;
      EXPECT_EQ(r.error()->offset(), s.frame_starts[k]) << cut;
    }
  }
}

TEST(TraceReader, SingleByteCorruptionIsCaughtAtItsFrame) {
  SmallFile s = small_file();
  for (size_t pos = 0; pos < s.bytes.size(); ++pos) {
    std::string bad = s.bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x41);
    if (pos < 12) {  // magic and version; bytes 12..15 are reserved and ignored
      EXPECT_THROW(TraceReader::from_bytes(bad), TraceError) << pos;
      continue;
    }
    if (pos < kFileHeaderSize) continue;
    TraceReader r = TraceReader::from_bytes(bad);
    size_t k = 0;
    while (s.frame_starts[k + 1] <= pos) ++k;
    ASSERT_TRUE(r.error()) << pos;
    EXPECT_EQ(r.error()->offset(), s.frame_starts[k]) << pos;
    EXPECT_EQ(r.frame_count(), k) << pos;
    EXPECT_EQ(r.event_count(), s.events_before[k]) << pos;
  }
}

// The one exit path of the commands that read a trace to its end: silent and 0
// for a whole trace; for a damaged one a line naming the command, the reader's
// error and what the output covers, and 2.
TEST(TraceReader, DamagedTraceExitSaysWhatTheOutputCovers) {
  SmallFile s = small_file();
  TraceReader whole = TraceReader::from_bytes(s.bytes);
  testing::internal::CaptureStderr();
  EXPECT_EQ(damaged_trace_exit(whole, "events before it were printed"), 0);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

  TraceReader cut = TraceReader::from_bytes(s.bytes.substr(0, s.bytes.size() - 1));
  ASSERT_TRUE(cut.error());
  set_command_name("rates");  // as the CLI does before the command runs
  testing::internal::CaptureStderr();
  EXPECT_EQ(damaged_trace_exit(cut, "rates cover the events before it"), 2);
  const std::string said = testing::internal::GetCapturedStderr();
  set_command_name("");
  EXPECT_EQ(said, "cptrace rates: " + std::string(cut.error()->what()) + " (rates cover the events before it)\n");
}

TEST(TraceReader, GarbledOrMissingFileHeaderThrows) {
  EXPECT_THROW(TraceReader::from_bytes(""), TraceError);
  EXPECT_THROW(TraceReader::from_bytes(std::string(100, 'x')), TraceError);
  for (uint32_t version : {0u, kFormatVersion + 1}) {
    std::string h = file_header_bytes();
    std::memcpy(h.data() + 8, &version, 4);
    try {
      TraceReader::from_bytes(h);
      FAIL() << version;
    } catch (const TraceError& e) {
      EXPECT_EQ(e.offset(), 8u);
      EXPECT_NE(std::string(e.what()).find(
                    fmt::format("unsupported format version {} (this build reads 1 to {})", version, kFormatVersion)),
                std::string::npos)
          << e.what();
    }
  }
}

// A file of version 1 (events as FrameType::Events, as recorders wrote them
// before Events2) reads as it did: its header and its frames.
TEST(TraceReader, VersionOneFilesStillRead) {
  auto ev = recording_like(100, 9);
  std::string bytes = file_header_bytes();
  const uint32_t v1 = 1;
  std::memcpy(bytes.data() + 8, &v1, 4);
  EncodedFrame clock = encode_clock({{1000, 500, 20, 0}, {3000, 1500, 20, 0}}), f;
  encode_events_version1(ev.data(), ev.size(), 1, f);
  for (const EncodedFrame* x : {&clock, &f}) {
    bytes.append(reinterpret_cast<const char*>(&x->hdr), sizeof x->hdr);
    bytes.append(reinterpret_cast<const char*>(x->payload.data()), x->payload.size());
  }
  TraceReader r = TraceReader::from_bytes(bytes);
  EXPECT_EQ(r.event_count(), ev.size());
  std::vector<TraceEvent> got = r.events();
  ASSERT_EQ(got.size(), ev.size());
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(got[i].ts, ev[i].ts);
    EXPECT_EQ(got[i].tuple, ev[i].tuple);
    EXPECT_EQ(got[i].tid, ev[i].tid);
  }
}

TEST(TraceReader, HostileFrameHeaders) {
  std::string head = file_header_bytes();
  FrameHeader h{kFrameMagic, 1, 0, 0xffffffff, 0xffffffff, 0xffffffff, 0};
  std::string bytes = head + std::string(reinterpret_cast<const char*>(&h), sizeof h) + "abc";
  TraceReader r = TraceReader::from_bytes(bytes);
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->offset(), kFileHeaderSize);
  h = {kFrameMagic, 1, 0, 3, 3, 0xffffffff, 0};  // count far beyond what 3 bytes can hold
  h.crc32 = frame_crc(h, "abc", 3);
  bytes = head + std::string(reinterpret_cast<const char*>(&h), sizeof h) + "abc";
  r = TraceReader::from_bytes(bytes);
  ASSERT_TRUE(r.error());
  EXPECT_NE(std::string(r.error()->what()).find("undecodable events frame"), std::string::npos);
}

TEST(TraceReader, UnknownFrameTypesAreSkipped) {
  EncodedFrame f = encode_json(FrameType::Counters, "{}", 1);
  f.hdr.type = 99;
  reseal(f);
  std::string bytes = file_header_bytes() + std::string(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr) +
                      std::string(f.payload.begin(), f.payload.end());
  TraceReader r = TraceReader::from_bytes(bytes);
  EXPECT_FALSE(r.error());
  EXPECT_EQ(r.frame_count(), 1u);
}

std::string frame_bytes(const EncodedFrame& f) {
  return std::string(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr) +
         std::string(f.payload.begin(), f.payload.end());
}

TEST(TraceReader, SyncRoundsRoundTrip) {
  SyncRound a{"B", "10.77.2.2:7700", "start", 3, 100, 5000, 5010, 130, 90, 4990, 5030, 170, true, true};
  SyncRound b = a;
  b.phase = "stop";
  b.seq = 4;
  b.t4 = ~0ull;  // full 64-bit range survives JSON
  b.kernel_ok = false;
  std::string bytes = file_header_bytes() + frame_bytes(encode_json(FrameType::Sync, sync_frame_json({a, b}), 2));
  TraceReader r = TraceReader::from_bytes(bytes);
  EXPECT_FALSE(r.error());
  ASSERT_EQ(r.sync_rounds().size(), 2u);
  EXPECT_EQ(r.sync_rounds()[0], a);
  EXPECT_EQ(r.sync_rounds()[1], b);
  EXPECT_EQ(a.kernel_rtt(), 30 - 10);
  EXPECT_EQ(a.user_rtt(), 80 - 40);
}

TEST(TraceReader, MalformedSyncFrameStopsTheScanAndAddsNothing) {
  std::string good = sync_frame_json({SyncRound{"B", "", "start", 1, 1, 2, 3, 4, 0, 0, 0, 0, true, false}});
  std::string bad =
      R"([{"peer":"B","phase":"start","seq":1,"t":[1,2,3,4],"u":[0,0,0,0],"kernel_ok":true,"user_ok":true},)"
      R"({"peer":"B","phase":"start","seq":2,"t":[1,2,3],"u":[0,0,0,0],"kernel_ok":true,"user_ok":true}])";
  std::string first = file_header_bytes() + frame_bytes(encode_json(FrameType::Sync, good, 1));
  TraceReader r = TraceReader::from_bytes(first + frame_bytes(encode_json(FrameType::Sync, bad, 2)));
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->offset(), first.size());
  EXPECT_NE(std::string(r.error()->what()).find("sync"), std::string::npos) << r.error()->what();
  EXPECT_EQ(r.sync_rounds().size(), 1u);
}

TEST(TraceReader, KernelEventsNeedTwoClockPoints) {
  TraceEvent e;
  e.timebase = static_cast<uint8_t>(Timebase::MonoNs);
  auto file = [&](std::vector<ClockPoint> pts) {
    std::string b = file_header_bytes();
    for (const EncodedFrame& f : {encode_clock(pts), encode_events(&e, 1)}) {
      b.append(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr);
      b.append(f.payload.begin(), f.payload.end());
    }
    return TraceReader::from_bytes(b);
  };
  try {
    file({}).events();
    FAIL();
  } catch (const TraceError& err) {
    EXPECT_NE(std::string(err.what()).find("no clock-correlation points"), std::string::npos);
  }
  EXPECT_THROW(file({{1, 1, 0, 0}}).events(), TraceError);
  EXPECT_EQ(file({{1000, 1000, 0, 0}, {2000, 1500, 0, 0}}).events().at(0).ts, 0u);  // 1000 - 2*1000, saturated
}

// ---- writer -> reader on disk -------------------------------------------------------------

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "cptrace-test-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(TraceWriter, RoundTripThroughDirectory) {
  TempDir tmp;
  std::string dir = (tmp.path / "node-a").string();
  auto ev = recording_like(5000, 5);
  for (size_t i = 0; i < ev.size(); i += 3) {
    ev[i].timebase = static_cast<uint8_t>(Timebase::MonoNs);
    ev[i].ts = 1000000 + i * 300;
  }
  std::vector<ClockPoint> pts = {{3000000000ull, 1000000, 5, 0}, {6000000000ull, 2000000000, 5, 0}};
  {
    TraceWriter w(dir, {{"node", "a"}});
    w.write(encode_clock(pts));
    w.write(encode_json(FrameType::Channels, json::array({{{"id", ev[0].channel}, {"name", "in"}}}).dump(), 1));
    w.write(encode_events(ev.data(), 2000));
    w.write(encode_events(ev.data() + 2000, 3000));
    w.write(encode_json(FrameType::Channels, json::array({{{"id", ev[0].channel}, {"name", "in2"}}}).dump(), 1));
    w.write(encode_json(FrameType::Counters, R"({"seen":[3000,2000],"dropped":[1,2],"read_fail":[0,0]})", 1));
    EXPECT_EQ(w.bytes_written(), fs::file_size(fs::path(dir) / "events.cpt"));
    w.finish({{"node", "a"}, {"stop", {{"tsc", 42}}}});
  }
  TraceReader r(dir);
  EXPECT_FALSE(r.error());
  EXPECT_EQ(r.meta_problem(), "");
  EXPECT_EQ(r.meta()["stop"]["tsc"], 42);
  EXPECT_EQ(r.trace_meta().node, "a");
  EXPECT_EQ(r.trace_meta().stop.tsc, 42u);
  EXPECT_EQ(r.meta()["format_version"], kFormatVersion);
  EXPECT_EQ(r.clock(), pts);
  EXPECT_EQ(r.channel_name(ev[0].channel), "in2");  // later frames win
  EXPECT_EQ(r.counters().total_dropped(), 3u);
  EXPECT_EQ(r.counters_json()["read_fail"].size(), 2u);
  EXPECT_EQ(r.event_count(), 5000u);
  EXPECT_EQ(r.raw_event_bytes(), 5000u * sizeof(TraceEvent));
  EXPECT_EQ(r.frame_count(), 6u);
  EXPECT_EQ(r.valid_bytes(), r.file_bytes());
  size_t i = 0;
  r.for_each_event([&](const TraceEvent& e) {
    TraceEvent want = ev[i++];
    if (want.timebase == static_cast<uint8_t>(Timebase::MonoNs)) {
      ClockMap::Stamp s = r.clock_map().mono_to_stamp(want.ts);
      want.ts = s.ts;
      want.ts_err = s.err;  // the conversion's bound, never 0 for a kernel stamp
      EXPECT_GT(s.err, 0u);
      want.timebase = static_cast<uint8_t>(Timebase::Tsc);
    }
    EXPECT_EQ(e, want);
  });
  EXPECT_EQ(i, ev.size());
  EXPECT_EQ(TraceReader((fs::path(dir) / "events.cpt").string()).event_count(), 5000u);
}

TEST(TraceWriter, RefusesExistingTraceUnlessOverwrite) {
  TempDir tmp;
  std::string dir = tmp.path.string();
  { TraceWriter w(dir, json::object()); }
  try {
    TraceWriter w(dir, json::object());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos);
  }
  TraceWriter w(dir, json::object(), true);
  EXPECT_EQ(w.bytes_written(), kFileHeaderSize);
}

TEST(TraceWriter, UnfinishedTraceStillReads) {
  TempDir tmp;
  auto ev = recording_like(100, 6);
  {
    TraceWriter w(tmp.path.string(), {{"node", "b"}});
    w.write(encode_events(ev.data(), ev.size()));
  }  // no finish(): what a killed recorder leaves
  TraceReader r(tmp.path.string());
  EXPECT_EQ(r.meta()["node"], "b");
  EXPECT_EQ(r.events(), ev);
}

TEST(TraceReader, MissingFilesAndMeta) {
  TempDir tmp;
  EXPECT_THROW(TraceReader(tmp.path.string()), TraceError);
  {
    TraceWriter w(tmp.path.string(), json::object());
    w.finish(json::object());
  }
  fs::remove(tmp.path / "meta.json");
  TraceReader r(tmp.path.string());
  EXPECT_NE(r.meta_problem(), "");
  EXPECT_TRUE(r.meta().empty());
  EXPECT_EQ(r.event_count(), 0u);
}

// meta.json carries one version key, the events file's; a build refuses a
// meta.json of another version instead of misreading its fields, and reads the
// key older traces wrote beside it.
TEST(TraceReader, MetaOfAnotherFormatVersionIsRefused) {
  TempDir tmp;
  {
    TraceWriter w(tmp.path.string(), json::object());
    w.finish({{"node", "a"}});
  }
  json written = json::parse(std::ifstream(tmp.path / "meta.json"));
  EXPECT_EQ(written["format_version"], kFormatVersion);
  EXPECT_FALSE(written.contains("version"));
  auto with_meta = [&](const json& m) {
    std::ofstream(tmp.path / "meta.json") << m.dump();
    return TraceReader(tmp.path.string());
  };
  TraceReader newer = with_meta({{"node", "a"}, {"format_version", kFormatVersion + 1}});
  EXPECT_TRUE(newer.meta().empty());
  EXPECT_NE(newer.meta_problem().find("format_version " + std::to_string(kFormatVersion + 1)), std::string::npos)
      << newer.meta_problem();
  EXPECT_NE(newer.meta_problem().find("meta.json"), std::string::npos) << newer.meta_problem();
  TraceReader odd = with_meta({{"node", "a"}, {"version", "1"}});
  EXPECT_NE(odd.meta_problem().find("format_version \"1\""), std::string::npos) << odd.meta_problem();
  TraceReader older = with_meta({{"node", "a"}, {"version", kFormatVersion}});
  EXPECT_EQ(older.meta_problem(), "");
  EXPECT_EQ(older.meta()["node"], "a");
}

// The facts every command reads of meta.json come typed, once: absent keys
// keep their defaults, a key of the wrong kind is refused naming it (a damaged
// file, not one without that fact), and the reader then uses no meta.json.
TEST(TraceMeta, TypedFactsAbsentDefaultsWrongKindsNamed) {
  const json full = {{"node", "b"},
                     {"start", {{"realtime_ns", 1700000000000000000}, {"mono_ns", 5000}, {"tsc", 9000}}},
                     {"stop", {{"tsc", 19000}}},
                     {"tsc_hz", 2.1e9},
                     {"complete", true},
                     {"recorded_net_events", 12},
                     {"net", {{"send_calls", true}}}};
  const TraceMeta m = TraceMeta::from_json(full);
  EXPECT_EQ(m.node, "b");
  EXPECT_EQ(m.start.tsc, 9000u);
  EXPECT_EQ(m.stop.tsc, 19000u);
  EXPECT_EQ(m.stop.mono_ns, std::nullopt);
  EXPECT_EQ(m.start_rt_minus_mono_ns(), 1700000000000000000 - 5000);
  EXPECT_DOUBLE_EQ(m.tsc_hz, 2.1e9);
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.recorded_net_events, 12u);
  EXPECT_TRUE(m.net_send_calls);

  const TraceMeta none = TraceMeta::from_json(json::object());
  EXPECT_EQ(none.node, "");
  EXPECT_EQ(none.start.tsc, std::nullopt);
  EXPECT_EQ(none.start_rt_minus_mono_ns(), std::nullopt);
  EXPECT_EQ(none.tsc_hz, 0);
  EXPECT_FALSE(none.complete || none.net_send_calls);

  auto refusal = [&](const char* key, const json& v) {
    json j = full;
    j[json::json_pointer(key)] = v;
    try {
      TraceMeta::from_json(j);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("/node", 5), "node: 5 is number, not a string");
  EXPECT_EQ(refusal("/start/tsc", "12"), "start.tsc: \"12\" is string, not an unsigned integer");
  EXPECT_EQ(refusal("/start/tsc", -1), "start.tsc: -1 is number, not an unsigned integer");
  EXPECT_EQ(refusal("/start/mono_ns", uint64_t(1) << 63),
            "start.mono_ns: 9223372036854775808 is number, not a signed 64-bit integer");
  EXPECT_EQ(refusal("/stop", 42), "stop: 42 is number, not an object");
  EXPECT_EQ(refusal("/tsc_hz", -3.0), "tsc_hz: -3.0 is number, not a frequency in Hz");
  EXPECT_EQ(refusal("/net/send_calls", 1), "net.send_calls: 1 is number, not true or false");
  EXPECT_EQ(refusal("/recorded_net_events", 1.5), "recorded_net_events: 1.5 is number, not an unsigned integer");
  EXPECT_EQ(refusal("/complete", std::string(50, 'y')),
            "complete: \"" + std::string(39, 'y') + " is string, not true or false");
  EXPECT_EQ(refusal("/node", json::array({std::string("in\xff")})),
            "node: [\"in\xEF\xBF\xBD\"] is array, not a string");  // U+FFFD

  TempDir tmp;
  {
    TraceWriter w(tmp.path.string(), json::object());
    json j = full;
    j["node"] = json::array();
    w.finish(j);
  }
  TraceReader r(tmp.path.string());
  EXPECT_TRUE(r.meta().empty());
  EXPECT_EQ(r.trace_meta().node, "");
  EXPECT_NE(r.meta_problem().find("meta.json: node: [] is array, not a string"), std::string::npos) << r.meta_problem();
  try {
    read_trace_meta(tmp.path.string());
    ADD_FAILURE() << "a damaged meta.json was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/meta.json: node: [] is array"), std::string::npos) << e.what();
  }
}

// Writes the fuzzing seed corpus when CPTRACE_FUZZ_SEED_DIR is set (kept in the
// repository under tests/fuzz/corpus; regenerate after format changes with
// CPTRACE_FUZZ_SEED_DIR=DIR cptrace_tests --gtest_also_run_disabled_tests
// --gtest_filter=FuzzSeeds.*). A generator, not a check: disabled by default.
// The corpus also keeps what it wrote before Events2 (*-v1.cpt): old traces
// must stay readable.
TEST(FuzzSeeds, DISABLED_Write) {
  const char* dir = std::getenv("CPTRACE_FUZZ_SEED_DIR");
  if (!dir) GTEST_SKIP() << "set CPTRACE_FUZZ_SEED_DIR to write the fuzzing seeds";
  auto put = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(fs::path(dir) / name, std::ios::binary) << bytes;
  };
  SmallFile s = small_file();
  put("small-multi-frame.cpt", s.bytes);
  put("header-only.cpt", file_header_bytes());
  auto ev = recording_like(300, 8);
  EncodedFrame raw, z;  // version 1, as older recorders wrote
  encode_events_version1(ev.data(), 12, 0, raw);
  encode_events_version1(ev.data(), ev.size(), 1, z);
  auto frame = [](const EncodedFrame& f) {
    return std::string(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr) +
           std::string(f.payload.begin(), f.payload.end());
  };
  std::string v1_header = file_header_bytes();
  const uint32_t v1 = 1;
  std::memcpy(v1_header.data() + 8, &v1, 4);
  put("events-raw.cpt", v1_header + frame(raw));
  put("events-zstd.cpt", v1_header + frame(z));
  put("events2-raw.cpt", file_header_bytes() + frame(encode_events(ev.data(), 40, 0)));
  put("events2-zstd.cpt", file_header_bytes() + frame(encode_events(ev.data(), ev.size(), 1)));
  put("truncated.cpt", s.bytes.substr(0, s.bytes.size() - 7));
  // Version-2 clock points and clock adjustments (trace/clock_adjust.h).
  ClockPoint p1{1000, 2000, 5, kClockHasRaw | kClockHasRealtime, 1001, 1900, 6, 40, 1'700'000'000'000'000'000};
  ClockPoint p2{3000, 3000, 5, kClockHasRaw, 3001, 2900, 6, 0, 0};
  std::string adj = R"([{"kind":"syscall","mono_ns":2500,"syscall":"adjtimex","modes":2,"freq":13107200},)"
                    R"({"kind":"state","mono_ns":3000,"state":{"status":8193,"freq":0,"tick":10000,"offset":5}},)"
                    R"({"kind":"step","mono_ns":3000,"step_ns":1000000000}])";
  put("clock-v2-adjust.cpt",
      file_header_bytes() + frame(encode_clock({p1, p2})) + frame(encode_json(FrameType::ClockAdjust, adj, 3)));
}

}  // namespace
}  // namespace cptrace

namespace {

std::string frame_image(const cptrace::EncodedFrame& f) {
  std::string s(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr);
  s.append(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
  return s;
}

}  // namespace

// Processes frames (trace/pid_table.h): host pid -> pid in its own namespace; a
// later entry of a pid wins, a host process has no container pid, and a frame
// with one malformed entry adds nothing (it is the first bad frame).
TEST(TraceReader, ProcessesFramesGiveContainerPids) {
  using namespace cptrace;
  std::string img = file_header_bytes();
  img += frame_image(
      encode_json(FrameType::Processes, pid_frame_json(100, {{4242, 7, 200}, {4300, 4300, 100}}).dump(), 2));
  img += frame_image(encode_json(FrameType::Processes, pid_frame_json(100, {{4242, 8, 200}}).dump(), 1));
  TraceReader r = TraceReader::from_bytes(img);
  ASSERT_FALSE(r.error()) << r.error()->what();
  EXPECT_EQ(r.pids().container_pid(4242), std::optional<uint32_t>(8));
  EXPECT_EQ(r.pids().container_pid(4300), std::nullopt) << "a host process";
  EXPECT_EQ(r.pids().container_pid(1), std::nullopt) << "an unknown pid";
  EXPECT_EQ(r.pids().text_suffix(4242), " nspid=8");
  EXPECT_EQ(r.pids().csv_field(4300), "");
  EXPECT_TRUE(r.pids().any_container());

  nlohmann::json bad = pid_frame_json(100, {{5000, 1, 300}});
  bad["processes"].push_back({{"pid", 5001}});  // no nspid
  TraceReader b = TraceReader::from_bytes(img + frame_image(encode_json(FrameType::Processes, bad.dump(), 2)));
  ASSERT_TRUE(b.error());
  EXPECT_EQ(b.pids().container_pid(5000), std::nullopt) << "part of a malformed frame was applied";
  EXPECT_EQ(b.pids().container_pid(4242), std::optional<uint32_t>(8)) << "frames before it are kept";
}

// The cgroup and container id of a process (record --all tells containers
// apart by them): kept through a Processes frame; the id is the 64-hex run a
// runtime puts into the cgroup's last component, and nothing else.
TEST(TraceReader, ProcessesFramesKeepCgroupAndContainerId) {
  using namespace cptrace;
  const std::string id(64, 'a');
  PidEntry e{4242, 7, 200};
  e.cgroup = "/system.slice/docker-" + id + ".scope";
  e.container_id = container_id_of_cgroup(e.cgroup);
  EXPECT_EQ(e.container_id, id);
  std::string img = file_header_bytes();
  img += frame_image(encode_json(FrameType::Processes, pid_frame_json(100, {e, {4300, 4300, 100}}).dump(), 2));
  TraceReader r = TraceReader::from_bytes(img);
  ASSERT_FALSE(r.error()) << r.error()->what();
  EXPECT_EQ(r.pids().by_pid.at(4242), e);
  EXPECT_EQ(r.pids().by_pid.at(4300).cgroup, "");

  const std::string hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  EXPECT_EQ(container_id_of_cgroup("/kubepods/besteffort/pod1/cri-containerd-" + hex + ".scope"), hex);
  EXPECT_EQ(container_id_of_cgroup("/docker/" + hex), hex);
  EXPECT_EQ(container_id_of_cgroup("/docker/" + hex + "/sub"), "") << "only the last component";
  EXPECT_EQ(container_id_of_cgroup("/user.slice/user-0.slice/session-1.scope"), "");
  EXPECT_EQ(container_id_of_cgroup("/x/" + hex + "0"), "") << "65 hex digits are no id";
  EXPECT_EQ(container_id_of_cgroup("/"), "");
}

namespace cptrace {
namespace {

// frame_crc (libdeflate's, folded with carry-less multiplications on CPUs that have them) is
// zlib's crc32 over the header's first 20 bytes then the payload, bit for bit:
// every payload length up to 1 KiB at every alignment, large random payloads,
// and constant ones.
TEST(FrameCrc, SameAsZlibForEveryLengthAndAlignment) {
  std::mt19937_64 rng(38);
  std::vector<unsigned char> buf(1 << 20);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  auto zlib = [](const FrameHeader& h, const unsigned char* p, size_t len) {
    uLong c = crc32(0, reinterpret_cast<const Bytef*>(&h), 20);
    return uint32_t(crc32(c, p, uInt(len)));
  };
  FrameHeader h{};
  auto random_header = [&] {
    unsigned char raw[sizeof h];
    for (auto& b : raw) b = static_cast<unsigned char>(rng());
    std::memcpy(&h, raw, sizeof h);
  };
  for (size_t align = 0; align < 16; ++align)
    for (size_t len = 0; len <= 1024; ++len) {
      random_header();
      ASSERT_EQ(frame_crc(h, buf.data() + align, len), zlib(h, buf.data() + align, len))
          << "length " << len << " at offset " << align;
    }
  for (int k = 0; k < 200; ++k) {
    random_header();
    size_t off = rng() % 4096, len = rng() % (buf.size() - off);
    ASSERT_EQ(frame_crc(h, buf.data() + off, len), zlib(h, buf.data() + off, len))
        << "length " << len << " at offset " << off;
  }
  // All zero and all one bytes: where a wrong folding constant would show.
  for (unsigned char fill : {0x00, 0xff}) {
    std::vector<unsigned char> same(4096 + 48, fill);
    std::memset(&h, fill, sizeof h);
    for (size_t len : {size_t(64), size_t(80), size_t(127), size_t(4096 + 48)})
      EXPECT_EQ(frame_crc(h, same.data(), len), zlib(h, same.data(), len)) << len;
  }
}

}  // namespace
}  // namespace cptrace
