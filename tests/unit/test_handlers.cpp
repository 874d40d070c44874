// Handler parsing, config rules and the handler table (with a fake map, no BPF).
#include <gtest/gtest.h>

#include <map>

#include <fmt/core.h>

#include "cptrace.h"
#include "probe/handlers.h"
#include "collect/ring_drain.h"
#include "trace/trace_reader.h"

using namespace cptrace;

namespace {

struct FakeMap {
  std::map<uint64_t, cp_handler> m;
  int updates = 0, enables = 0;
  int fail = 0;  // -errno to return
  int fail_after = -1;  // updates that succeed before `fail` (-1: fail at once)
  std::unique_ptr<HandlerTable> table(double tsc_hz = 2e9, size_t capacity = 16384) {
    return std::make_unique<HandlerTable>(
        [this](uint64_t id, const cp_handler& v) {
          if (fail && fail_after-- <= 0) return fail;
          updates++;
          m[id] = v;
          return 0;
        },
        [this] { enables++; }, tsc_hz, capacity);
  }
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(HandlerParse, EveryHandlerAndItsParameters) {
  EXPECT_EQ(parse_handler({"id"}).kind, uint32_t(CP_H_ID));
  EXPECT_EQ(parse_handler({"null"}).kind, uint32_t(CP_H_NULL));
  EXPECT_EQ(parse_handler({"firstlast"}).kind, uint32_t(CP_H_FIRSTLAST));
  auto d = parse_handler({"downsample", "10"});
  EXPECT_EQ(d.kind, uint32_t(CP_H_DOWNSAMPLE));
  EXPECT_EQ(d.p1, 10u);
  EXPECT_EQ(d.text, "downsample 10");
  auto x = parse_handler({"xoy", "3", "10"});
  EXPECT_EQ(x.p1, 3u);
  EXPECT_EQ(x.p2, 10u);
  EXPECT_EQ(parse_handler({"counter", "10ms"}).p1, 10000000u);
  EXPECT_EQ(parse_handler({"counter", "2s"}).p1, 2000000000u);
  EXPECT_EQ(parse_handler({"counter", "5us"}).p1, 5000u);
}

TEST(HandlerParse, BadInputNamesWhatIsWrong) {
  EXPECT_NE(error_of([] { parse_handler({}); }).find("missing handler"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"sample"}); }).find("unknown handler `sample`"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"downsample"}); }).find("takes 1 parameter"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"downsample", "0"}); }).find(">= 1"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"downsample", "-3"}); }).find("`-3`"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"downsample", "1e3"}); }).find("`1e3`"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"xoy", "4", "3"}); }).find("X (4) must be <= Y (3)"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"xoy", "0", "0"}); }).find("Y: must be >= 1"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"counter", "10"}); }).find("unit"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"counter", "10h"}); }).find("`10h`"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"counter", "500ns"}); }).find("minimum"), std::string::npos);
  EXPECT_NE(error_of([] { parse_handler({"id", "1"}); }).find("takes 0 parameter"), std::string::npos);
}

TEST(HandlerConfig, LinesCommentsAndErrorsWithLineNumbers) {
  auto rules = parse_config_text("# top\n\nparser.in downsample 4  # trailing\nnet.* xoy 1 2\n*  null\n", "f.conf");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].pattern, "parser.in");
  EXPECT_EQ(rules[0].line, 3);
  EXPECT_FALSE(rules[0].glob());
  EXPECT_TRUE(rules[1].glob());
  EXPECT_EQ(rules[2].spec.kind, uint32_t(CP_H_NULL));
  EXPECT_EQ(error_of([] { parse_config_text("a id\nb downsample\n", "f.conf"); }),
            "f.conf:2: handler `downsample` takes 1 parameter(s) (N >= 1), got 0");
  EXPECT_NE(error_of([] { parse_config_file("/nonexistent/x.conf"); }).find("/nonexistent/x.conf"), std::string::npos);
}

TEST(HandlerTable, ExactNamesAndDefaultInstalledUpFrontFirstMatchWins) {
  FakeMap fm;
  auto t = fm.table();
  t->set_rules(parse_config_text("chan* xoy 1 2\nchan0 null\nother downsample 3\n* firstlast\n", "c"));
  // chan0 is matched by the earlier glob: it is not installed as an exact name.
  EXPECT_EQ(fm.m.count(cp_channel_id("chan0")), 0u);
  ASSERT_EQ(fm.m.count(cp_channel_id("other")), 1u);
  EXPECT_EQ(fm.m[cp_channel_id("other")].cur.kind, uint32_t(CP_H_DOWNSAMPLE));
  ASSERT_EQ(fm.m.count(0), 1u);
  EXPECT_EQ(fm.m[0].cur.kind, uint32_t(CP_H_FIRSTLAST));
  EXPECT_EQ(fm.enables, 1);
  // The glob applies when the name becomes known; a previous rule is the default.
  t->on_channel(cp_channel_id("chan0"), "chan0");
  const cp_handler& h = fm.m.at(cp_channel_id("chan0"));
  EXPECT_EQ(h.cur.kind, uint32_t(CP_H_XOY));
  EXPECT_EQ(h.prev.kind, uint32_t(CP_H_FIRSTLAST));
  EXPECT_EQ(h.prev.gen, fm.m[0].cur.gen);
  EXPECT_GT(h.since_tsc, 0u);
  t->on_channel(cp_channel_id("zzz"), "zzz");  // only the default: no own entry
  EXPECT_EQ(fm.m.count(cp_channel_id("zzz")), 0u);
  auto hist = t->history();
  ASSERT_EQ(hist.size(), 3u);
  EXPECT_EQ(hist[2]["source"], "pattern");
  EXPECT_EQ(hist[2]["rule"], "chan*");
  EXPECT_LE(hist[2]["before"]["mono_ns"].get<uint64_t>(), hist[2]["after"]["mono_ns"].get<uint64_t>());
}

TEST(HandlerTable, SetChainsPreviousRuleAndRefusesUnknownChannels) {
  FakeMap fm;
  auto t = fm.table(3e9);
  t->on_channel(cp_channel_id("a"), "a");
  t->on_channel(cp_channel_id("b"), "b");
  auto c1 = t->set("a", parse_handler({"downsample", "10"}));
  ASSERT_EQ(c1.size(), 1u);
  uint64_t g1 = fm.m[cp_channel_id("a")].cur.gen;
  t->set("a", parse_handler({"counter", "1ms"}));
  const cp_handler& h = fm.m[cp_channel_id("a")];
  EXPECT_EQ(h.prev.gen, g1);
  EXPECT_EQ(h.prev.kind, uint32_t(CP_H_DOWNSAMPLE));
  EXPECT_EQ(h.cur.p1, 1000000u);
  EXPECT_EQ(h.cur.p2, 3000000u) << "1 ms at 3 GHz, for the batch path's TSC timestamps";
  int before = fm.updates;
  EXPECT_NE(error_of([&] { t->set("nope", parse_handler({"id"})); }).find("unknown channel `nope`"), std::string::npos);
  EXPECT_NE(error_of([&] { t->set("x*", parse_handler({"id"})); }).find("matches no known channel"), std::string::npos);
  EXPECT_EQ(fm.updates, before) << "a refused change touched the map";
  // A glob hits every known match, by id too, and stays for later channels.
  EXPECT_EQ(t->set("[ab]", parse_handler({"null"})).size(), 2u);
  EXPECT_EQ(t->set(fmt::format("0x{:x}", cp_channel_id("b")), parse_handler({"id"})).size(), 1u);
  t->on_channel(cp_channel_id("c"), "c");
  EXPECT_EQ(fm.m.count(cp_channel_id("c")), 0u);
  t->on_channel(cp_channel_id("a2"), "a2");
  EXPECT_EQ(fm.m.count(cp_channel_id("a2")), 0u);
  // A failing map update is an error, and the history does not claim it.
  size_t hist = t->history().size();
  fm.fail = -ENOSPC;
  EXPECT_NE(error_of([&] { t->set("a", parse_handler({"id"})); }).find("No space"), std::string::npos);
  EXPECT_EQ(t->history().size(), hist);
}

// The control socket cannot grow the recorder without bound or leave a change
// half done unsaid: a pattern set again replaces itself, a change the map cannot
// hold is refused before any write, a failure midway names what changed.
TEST(HandlerTable, ControlChangesAreBoundedAndSayWhatChanged) {
  FakeMap fm;
  auto t = fm.table(2e9, 4);  // the default and three channels
  for (const char* n : {"a1", "a2", "a3", "b1"}) t->on_channel(cp_channel_id(n), n);
  for (int i = 0; i < 3 * int(HandlerTable::kMaxControlGlobs); ++i) t->set("a[12]", parse_handler({"downsample", "2"}));
  t->set("*", parse_handler({"id"}));
  // Kept 12 288 times, the pattern would leave no room for another.
  EXPECT_EQ(error_of([&] { t->set("b?", parse_handler({"null"})); }), "");
  int before = fm.updates;
  std::string full = error_of([&] { t->set("?[0-9]", parse_handler({"null"})); });
  EXPECT_NE(full.find("the handlers map holds 4 channels: 4 have a handler, this change would add 1"),
            std::string::npos)
      << full;
  EXPECT_EQ(fm.updates, before) << "refused, yet the map was written";
  t->on_channel(cp_channel_id("a9"), "a9");
  EXPECT_EQ(fm.m.count(cp_channel_id("a9")), 0u) << "a refused pattern was kept for later channels";
  // A map update that fails midway.
  FakeMap fm2;
  auto u = fm2.table(2e9, 16);
  for (const char* n : {"x1", "x2", "x3"}) u->on_channel(cp_channel_id(n), n);
  fm2.fail = -ENOMEM, fm2.fail_after = 2;
  std::string mid = error_of([&] { u->set("x*", parse_handler({"null"})); });
  EXPECT_NE(mid.find("after 2 of 3 channels changed, kept in the history; the pattern is not kept"), std::string::npos)
      << mid;
  EXPECT_EQ(u->history().size(), 2u);
  fm2.fail = 0;
  u->on_channel(cp_channel_id("x4"), "x4");
  EXPECT_EQ(fm2.m.count(cp_channel_id("x4")), 0u) << "the failed pattern applied to a later channel";
  // Patterns are counted: the one beyond the limit is refused, one set again is not.
  for (size_t i = 0; i < HandlerTable::kMaxControlGlobs; ++i)
    EXPECT_EQ(error_of([&] { u->set(fmt::format("x[1]{}", std::string(i, '*')), parse_handler({"id"})); }), "");
  std::string many = error_of([&] { u->set("x?", parse_handler({"id"})); });
  EXPECT_NE(many.find("4096 patterns are kept already (at most 4096)"), std::string::npos) << many;
  EXPECT_EQ(error_of([&] { u->set("x[1]", parse_handler({"null"})); }), "");
}

// A long recording whose handlers change often: memory keeps the last changes
// only, the trace every one of them, and `get` says how many it left out.
TEST(HandlerHistory, MemoryKeepsTheLastChangesTheTraceAll) {
  FakeMap fm;
  auto t = fm.table();
  t->on_channel(7, "seven");
  const size_t changes = 3 * HandlerTable::kHistoryKept + 17;
  std::string file = file_header_bytes();
  for (size_t i = 0; i < changes; ++i) {
    t->set("seven", parse_handler({"downsample", std::to_string(2 + i % 5)}));
    EncodedFrame f;
    if (i % 100 == 99 && t->take_pending(f)) {  // the recorder writes them as it goes
      file.append(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr);
      file.append(f.payload.begin(), f.payload.end());
    }
  }
  EXPECT_LE(t->history().size(), HandlerTable::kHistoryKept + 99) << "kept beyond the cap (and the unwritten)";
  EXPECT_EQ(t->history().size() + t->history_omitted(), changes);
  EncodedFrame last;
  ASSERT_TRUE(t->take_pending(last)) << "the unwritten changes were forgotten";
  file.append(reinterpret_cast<const char*>(&last.hdr), sizeof last.hdr);
  file.append(last.payload.begin(), last.payload.end());
  EXPECT_EQ(t->history().size(), HandlerTable::kHistoryKept);
  EXPECT_EQ(t->history().back()["gen"], t->history().front()["gen"].get<uint64_t>() + HandlerTable::kHistoryKept - 1);
  auto reply = handle_control(*t, {{"cmd", "get"}});
  EXPECT_EQ(reply["history_omitted"], changes - HandlerTable::kHistoryKept);
  TraceReader r = TraceReader::from_bytes(file);
  ASSERT_FALSE(r.error()) << r.error()->what();
  EXPECT_EQ(r.handler_changes().size(), changes) << "the trace holds every change";
}

TEST(HandlerHistory, FramesRoundTripThroughTheReader) {
  FakeMap fm;
  auto t = fm.table();
  t->on_channel(7, "seven");
  t->set("seven", parse_handler({"xoy", "1", "3"}));
  EncodedFrame f, again;
  ASSERT_TRUE(t->take_pending(f));
  EXPECT_FALSE(t->take_pending(again)) << "an entry written twice";
  std::string file = file_header_bytes();
  file.append(reinterpret_cast<const char*>(&f.hdr), sizeof f.hdr);
  file.append(f.payload.begin(), f.payload.end());
  TraceReader r = TraceReader::from_bytes(file);
  ASSERT_FALSE(r.error()) << r.error()->what();
  ASSERT_EQ(r.handler_changes().size(), 1u);
  EXPECT_EQ(r.handler_changes()[0]["spec"], "xoy 1 3");
  EXPECT_EQ(r.handler_changes()[0]["channel"], 7u);
}

TEST(HandlerRecords, CountRecordDecodesToACountEvent) {
  for (uint32_t tb : {0u, 1u}) {
    cp_count_rec r{};
    r.h.kind = CP_REC_COUNT;
    r.h.cpu = 1;
    r.h.pid = 10;
    r.h.tid = 11;
    r.h.n = tb;
    r.start = 5000000;
    r.channel = 77;
    r.count = 123;
    std::vector<TraceEvent> out;
    ASSERT_EQ(RingDrain::decode(&r, sizeof r, out, nullptr), 1);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].kind, uint8_t(EventKind::Count));
    EXPECT_EQ(out[0].ts, 5000000u);
    EXPECT_EQ(out[0].tuple, 123u);
    EXPECT_EQ(out[0].channel, 77u);
    EXPECT_EQ(out[0].timebase, uint8_t(tb ? Timebase::Tsc : Timebase::MonoNs));
    EXPECT_EQ(RingDrain::decode(&r, sizeof r - 1, out, nullptr), -1) << "a short record is refused";
  }
}
