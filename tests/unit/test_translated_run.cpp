// translate/translated_run: meta.json "translated" read once, typed.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "translate/translated_run.h"

using cptrace::TranslatedRun;
using nlohmann::json;

namespace {

json translated_meta() {
  return json::parse(R"({"node": "merged", "translated": {
    "reference": "B", "method": "ratio",
    "nodes": [{"node": "A", "span_tsc": [500, 900]}, {"node": "B", "span_tsc": [1000, 2000]}],
    "frequency": {"hz": 2.0e9, "hz_lo": 1.999e9, "hz_hi": 2.001e9},
    "suspect_sync": [{"kind": "rate-beyond-limit", "pair": "A-B", "message": "A-B: 900 ppm", "ppm": 900}],
    "unauthenticated_rounds": ["A-B"]}})");
}

std::string error_of(const json& meta) {
  try {
    TranslatedRun::of(meta);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TranslatedRun, ReadsWhatTheCommandsTake) {
  std::optional<TranslatedRun> run = TranslatedRun::of(translated_meta());
  ASSERT_TRUE(run);
  EXPECT_EQ(run->reference, "B");
  EXPECT_EQ(run->method, "ratio");
  EXPECT_EQ(run->node_names, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(run->node_name(1), "B");
  EXPECT_EQ(run->node_name(7), "7");
  EXPECT_EQ(run->ref_origin, 1000u) << "the reference's span start, not the first node's";
  EXPECT_TRUE(run->have_ns);
  EXPECT_EQ(run->hz_lo, 1.999e9);
  ASSERT_EQ(run->suspect_sync.size(), 1u);
  EXPECT_EQ(run->suspect_sync[0].pair, "A-B");
  EXPECT_EQ(run->unauthenticated_rounds, (std::vector<std::string>{"A-B"}));
}

TEST(TranslatedRun, OneNodesTraceIsNone) {
  EXPECT_FALSE(TranslatedRun::of(json{{"node", "A"}}));
  EXPECT_FALSE(TranslatedRun::of(json::array()));
}

TEST(TranslatedRun, NoFrequencyMeansTicks) {
  json m = translated_meta();
  m["translated"]["frequency"] = {{"error", "no MinRTT rounds"}};
  EXPECT_FALSE(TranslatedRun::of(m)->have_ns);
}

TEST(TranslatedRun, AMalformedFieldIsNamed) {
  json m = translated_meta();
  m["translated"]["method"] = 3;
  EXPECT_NE(error_of(m).find("translated.method: not a string"), std::string::npos) << error_of(m);
  m = translated_meta();
  m["translated"]["nodes"] = "A,B";
  EXPECT_NE(error_of(m).find("translated.nodes: not an array"), std::string::npos) << error_of(m);
  m = translated_meta();
  m["translated"]["nodes"][1]["span_tsc"] = json::array({-5});
  EXPECT_NE(error_of(m).find("span_tsc"), std::string::npos) << error_of(m);
  m = translated_meta();
  m["translated"]["frequency"]["hz_lo"] = "fast";
  EXPECT_NE(error_of(m).find("frequency.hz_lo: not a number"), std::string::npos) << error_of(m);
  EXPECT_NE(error_of(json{{"translated", 1}}).find("translated: not an object"), std::string::npos);
}
