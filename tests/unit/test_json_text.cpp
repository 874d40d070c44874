// Strings from outside as JSON text (trace/json_text.h): valid UTF-8 unchanged,
// every other byte as \xNN, and a dump that never throws.
#include <gtest/gtest.h>

#include "trace/json_text.h"

namespace cptrace {
namespace {

TEST(JsonText, ValidTextIsUnchanged) {
  for (std::string s :
       {"", "chan0", "tab\there", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"})
    EXPECT_EQ(valid_utf8(s), s);
}

TEST(JsonText, EveryOtherByteIsEscaped) {
  EXPECT_EQ(valid_utf8("bad\xff\xfename"), "bad\\xff\\xfename");
  EXPECT_EQ(valid_utf8("cut\xc3"), "cut\\xc3");  // a sequence cut short
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "\\xc0\\xaf");  // overlong '/'
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(valid_utf8("\x80x"), "\\x80x");  // a lone continuation byte
  // What comes out always dumps.
  EXPECT_NO_THROW(nlohmann::json(valid_utf8("\xff\xc3\xed\xa0")).dump());
}

TEST(JsonText, DumpNeverThrows) {
  nlohmann::json j = {{"name", std::string("bad\xff")}};
  EXPECT_THROW(j.dump(), nlohmann::json::type_error);
  std::string t = json_text(j);
  EXPECT_EQ(nlohmann::json::parse(t)["name"], "bad\xef\xbf\xbd");  // U+FFFD
}

}  // namespace
}  // namespace cptrace
