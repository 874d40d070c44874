// `cptrace translate` picks the reference itself when there is only one choice:
// one node's trace translates without --reference onto its own TSC, exactly as
// with --reference naming it; several nodes without --reference are refused with
// the nodes named. Bad choice values are refused by the one parse function.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "synth_cluster.h"
#include "synthetic_trace.h"
#include "test_util.h"
#include "trace/trace_reader.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

using testutil::SyntheticTrace;
using testutil::TempDir;

std::vector<TranslatedEvent> translated_events(const std::string& dir) {
  TraceReader r(dir);
  std::vector<TranslatedEvent> all, frame;
  r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), frame);
    all.insert(all.end(), frame.begin(), frame.end());
  });
  return all;
}

// 300 events of node "synth" on two channels and two CPUs, 1 us apart.
std::string one_node(const TempDir& tmp) {
  SyntheticTrace t;
  t.channels = {{11, "a"}, {12, "b"}};
  for (uint64_t i = 0; i < 300; ++i) t.add(11 + i % 2, SyntheticTrace::kOrigin + 1000 * i, i / 2, uint16_t(i % 3 == 0));
  std::string dir = tmp / "synth";
  t.write(dir);
  return dir;
}

TEST(TranslateCli, OneNodeNeedsNoReference) {
  TempDir tmp;
  std::string in = one_node(tmp);
  std::string bin = testutil::cptrace_bin();
  auto r = testutil::run(bin + " translate " + in + " -o " + (tmp / "out"), tmp);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");

  // The node is its own reference: every event keeps its TSC, with a bound of width 0.
  std::vector<TranslatedEvent> evs = translated_events(tmp / "out");
  ASSERT_EQ(evs.size(), 300u);
  for (uint64_t i = 0; i < evs.size(); ++i) {
    const TranslatedEvent& e = evs[i];
    EXPECT_EQ(e.local_ts, SyntheticTrace::kOrigin + 1000 * i) << i;
    EXPECT_EQ(e.ref_ts, int64_t(e.local_ts)) << i;
    EXPECT_EQ(e.ref_lo, int64_t(e.local_ts)) << i;
    EXPECT_EQ(e.ref_hi, int64_t(e.local_ts)) << i;
    EXPECT_EQ(e.node, 0u) << i;
    EXPECT_EQ(e.channel, 11 + i % 2) << i;
    EXPECT_EQ(e.tuple, i / 2) << i;
    EXPECT_EQ(e.cpu, i % 3 == 0 ? 1u : 0u) << i;
  }

  TraceReader out(tmp / "out");
  const nlohmann::json& tr = out.meta().at("translated");
  EXPECT_EQ(tr["reference"], "synth");
  EXPECT_EQ(tr["method"], "best");
  EXPECT_EQ(tr["clock_model"], "linear");
  EXPECT_EQ(tr["inputs"], "both");
  EXPECT_EQ(tr["pairs"], nlohmann::json::array());
  ASSERT_EQ(tr["nodes"].size(), 1u);
  EXPECT_EQ(tr["nodes"][0]["path"], nlohmann::json::array({"synth"}));
  EXPECT_EQ(tr["nodes"][0]["to_reference"], nlohmann::json({{"type", "identity"}}));
  EXPECT_EQ(tr["nodes"][0]["events"], 300);
  EXPECT_EQ(tr["events"], 300);

  // Naming the node gives the same events.
  r = testutil::run(bin + " translate " + in + " --reference synth -o " + (tmp / "named"), tmp);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(translated_events(tmp / "named"), evs);
}

TEST(TranslateCli, SeveralNodesWithoutReferenceNamesThem) {
  TempDir tmp;
  synth::Cluster cl({{"A", 1e15L}, {"B", 2e15L}, {"C", 3e15L}}, 1);
  std::string dirs;
  for (int i = 0; i < 3; ++i) {
    cl.event(i, "x", 1, 1e6L);
    cl.write(i, tmp / cl.clock(i).name, 1e9L);
    dirs += " " + (tmp / cl.clock(i).name);
  }
  auto r = testutil::run(testutil::cptrace_bin() + " translate" + dirs + " -o " + (tmp / "out"), tmp);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err,
            "cptrace translate: the traces hold 3 nodes (A, B, C): name the one whose TSC is the common timebase "
            "with --reference\n");
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
}

// netlat relates nodes as translate does, and answers from their packets: traces
// without any say so, naming the option that records them.
TEST(TranslateCli, NetlatWithoutNetworkEventsSaysHowToRecordThem) {
  TempDir tmp;
  synth::Cluster cl({{"A", 1e15L}, {"B", 2e15L}}, 1);
  std::string dirs;
  for (int i = 0; i < 2; ++i) {
    cl.event(i, "x", 1, 1e6L);
    cl.write(i, tmp / cl.clock(i).name, 1e9L);
    dirs += " " + (tmp / cl.clock(i).name);
  }
  auto r = testutil::run(testutil::cptrace_bin() + " netlat" + dirs + " --reference A", tmp);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "cptrace netlat: no network events in these traces: record them with `cptrace record --net`\n");
  auto n = testutil::run(testutil::cptrace_bin() + " netlat" + dirs + " --reference A --to Z", tmp);
  EXPECT_EQ(n.status, 1);
  EXPECT_EQ(n.err, "cptrace netlat: --to Z: no such node (the traces hold A, B)\n");
}

// Each choice is checked once, by its parse function: the message names the
// flag, the bad value and the values there are.
TEST(TranslateCli, BadChoiceNamesFlagAndValue) {
  TempDir tmp;
  std::string in = one_node(tmp);
  const std::pair<std::string, std::string> cases[] = {
      {"--method fast", "--method fast: must be ratio, hull or best"},
      {"--clock-model cubic", "--clock-model cubic: must be linear or piecewise"},
      {"--inputs packets", "--inputs packets: must be both, rounds or traffic"},
  };
  for (const auto& [args, message] : cases) {
    auto r = testutil::run(testutil::cptrace_bin() + " translate " + in + " " + args + " -o " + (tmp / "out"), tmp);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "out")) << args;
  }
}

}  // namespace
}  // namespace cptrace
