// The reader's cheap check of an Events frame (events_frame_check.h) against
// the decoder: it may pass a frame only when decode_events_into() decodes it,
// with the same answer on MonoNs stamps, and it passes the frames the encoder
// writes (else every frame would be decoded twice again).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "trace/block_codec.h"
#include "trace/events_frame_check.h"

namespace cptrace {
namespace {

// Events with every column's values small and large: hashed tuple ids (10-byte
// varints), pids and cpus near their type's limits, many channels or one.
std::vector<TraceEvent> random_events(std::mt19937_64& rng, size_t n, size_t channels, bool mono) {
  std::vector<TraceEvent> ev(n);
  uint64_t ts = rng() >> 20;
  for (TraceEvent& e : ev) {
    ts += rng() % 3 == 0 ? rng() % 100000 : rng() % 50;
    e.ts = rng() % 97 == 0 ? rng() : ts;
    e.channel = 1000 + rng() % channels;
    e.tuple = rng() % 2 ? rng() : rng() % 1000;
    e.pid = rng() % 5 == 0 ? uint32_t(rng()) : 4000 + uint32_t(rng() % 3);
    e.tid = rng() % 5 == 0 ? uint32_t(rng()) : 4000 + uint32_t(rng() % 9);
    e.cpu = rng() % 7 == 0 ? uint16_t(rng()) : uint16_t(rng() % 4);
    e.kind = uint8_t(rng() % 4);
    e.timebase = uint8_t(mono && rng() % 3 == 0 ? Timebase::MonoNs : Timebase::Tsc);
  }
  return ev;
}

// A frame of either version: Events2 as recorders write it, Events as they did.
EncodedFrame frame_of(const std::vector<TraceEvent>& ev, int version, int level) {
  EncodedFrame f;
  if (version == 1)
    encode_events_version1(ev.data(), ev.size(), level, f);
  else
    encode_events_into(ev.data(), ev.size(), level, f);
  return f;
}

// Whether the decoder takes the frame, and its MonoNs answer.
bool decoder_takes(const EncodedFrame& f, bool& mono) {
  std::vector<TraceEvent> out;
  try {
    decode_events_into(f.hdr, f.payload.data(), f.payload.size(), out);
  } catch (const std::exception&) {
    return false;
  }
  mono = false;
  for (const TraceEvent& e : out) mono |= e.timebase == uint8_t(Timebase::MonoNs);
  return true;
}

TEST(EventsFrameCheck, PassesWhatTheEncoderWritesWithTheDecodersMonoAnswer) {
  std::mt19937_64 rng(7);
  for (int version : {1, 2})
    for (size_t n : {0, 1, 7, 8, 9, 31, 32, 33, 100, 5000})
      for (size_t channels : {1, 3, 200})
        for (bool mono_stamps : {false, true})
          for (int level : {0, 1}) {
            std::vector<TraceEvent> ev = random_events(rng, n, channels, mono_stamps);
            EncodedFrame f = frame_of(ev, version, level);
            bool mono = !mono_stamps, want = false;
            ASSERT_TRUE(decoder_takes(f, want));
            EXPECT_TRUE(events_frame_decodes(f.hdr, f.payload.data(), f.payload.size(), mono))
                << "version " << version << ", " << n << " events, " << channels << " channels, level " << level;
            EXPECT_EQ(mono, want);
          }
}

// Damaged column bytes, cut frames and wrong counts: whatever the check passes,
// the decoder decodes, and with the same MonoNs answer.
TEST(EventsFrameCheck, PassesNoFrameTheDecoderRefuses) {
  std::mt19937_64 rng(11);
  size_t passed = 0, refused = 0;
  for (int round = 0; round < 8000; ++round) {
    size_t n = rng() % 80;
    std::vector<TraceEvent> ev = random_events(rng, n, 1 + rng() % 4, rng() % 2);
    EncodedFrame f = frame_of(ev, 1 + round % 2, 0);  // uncompressed: its bytes damaged directly
    switch (rng() % 4) {
      case 0:  // a few bytes changed
        for (int k = 1 + int(rng() % 3); k > 0 && !f.payload.empty(); --k)
          f.payload[rng() % f.payload.size()] = uint8_t(rng() % 3 == 0 ? 0x80 | rng() : rng());
        break;
      case 1:  // one byte's continuation bit flipped
        if (!f.payload.empty()) f.payload[rng() % f.payload.size()] ^= 0x80;
        break;
      case 2:  // cut or extended
        f.payload.resize(rng() % (f.payload.size() + 3), uint8_t(rng()));
        break;
      default:  // another count
        f.hdr.count = uint32_t(rng() % 45);
    }
    f.hdr.raw_len = f.hdr.payload_len = uint32_t(f.payload.size());
    bool mono = false, want = false;
    bool check = events_frame_decodes(f.hdr, f.payload.data(), f.payload.size(), mono);
    bool decoder = decoder_takes(f, want);
    if (check) {
      ++passed;
      ASSERT_TRUE(decoder) << "round " << round;
      EXPECT_EQ(mono, want) << "round " << round;
    }
    refused += !decoder;
  }
  // Both kinds were met: damaged frames the decoder refuses, and frames passed.
  EXPECT_GT(passed, 400u);
  EXPECT_GT(refused, 2000u);
}

}  // namespace
}  // namespace cptrace
