// The frame-type table of docs/architecture.md against user/trace/trace_format.h:
// the doc is what a newcomer (or a reader written in another language) reads, so a
// frame type added to the header without a row, or a record size changed without
// the doc, must fail the build's tests rather than drift unnoticed.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "cptrace_net.h"
#include "test_util.h"
#include "trace/net_codec.h"
#include "trace/trace_format.h"

namespace cptrace {
namespace {

using testutil::read_file;
using testutil::source_dir;

// FrameType's enumerators as written in the header: value -> name. Parsed from
// the source because C++ cannot list an enum's names.
std::map<int, std::string> header_frame_types() {
  std::string h = read_file(source_dir() / "user" / "trace" / "trace_format.h");
  size_t begin = h.find("enum class FrameType");
  size_t end = h.find("};", begin);
  EXPECT_NE(begin, std::string::npos) << "no FrameType in trace_format.h";
  std::string body = h.substr(begin, end - begin);
  std::map<int, std::string> types;
  std::regex item(R"((\w+)\s*=\s*(\d+)\s*,)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), item); it != std::sregex_iterator(); ++it)
    types[std::stoi((*it)[2])] = (*it)[1];
  return types;
}

// The rows "| N `Name` | holds | written by |" of the doc's frame-type table.
std::map<int, std::string> doc_rows(std::map<int, std::string>* names) {
  std::string doc = read_file(source_dir() / "docs" / "architecture.md");
  std::map<int, std::string> rows;
  std::regex row(R"(\n\| (\d+) `(\w+)` \|([^\n]*))");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator(); ++it) {
    int type = std::stoi((*it)[1]);
    (*names)[type] = (*it)[2];
    rows[type] = (*it)[3];
  }
  return rows;
}

TEST(FrameTable, EveryHeaderTypeHasItsRow) {
  std::map<int, std::string> header = header_frame_types(), doc;
  doc_rows(&doc);
  ASSERT_GE(header.size(), 11u) << "FrameType not parsed from trace_format.h";
  EXPECT_EQ(header.at(static_cast<int>(FrameType::Clock2)), "Clock2");  // the parse reads the real enum
  EXPECT_EQ(header.at(static_cast<int>(FrameType::ClockAdjust)), "ClockAdjust");
  for (const auto& [type, name] : header) {
    ASSERT_TRUE(doc.count(type)) << "docs/architecture.md has no row for frame type " << type << " " << name;
    EXPECT_EQ(doc.at(type), name) << "frame type " << type;
  }
  for (const auto& [type, name] : doc) EXPECT_TRUE(header.count(type)) << "doc row for unknown type " << name;
}

// The record sizes the rows state are the ones the reader uses.
TEST(FrameTable, RecordSizesMatch) {
  std::map<int, std::string> names;
  std::map<int, std::string> rows = doc_rows(&names);
  auto says = [&](FrameType t, size_t bytes) {
    const std::string& row = rows[static_cast<int>(t)];
    EXPECT_NE(row.find(" " + std::to_string(bytes) + "-byte "), std::string::npos)
        << "row of frame type " << static_cast<int>(t) << " should say " << bytes << "-byte: " << row;
  };
  says(FrameType::Clock, kClockPointV1Bytes);
  says(FrameType::Clock2, kClockPointV2Bytes);
  says(FrameType::Net, kNetRecV1Bytes);
  says(FrameType::Net2, sizeof(cp_net_rec));
  std::string doc = read_file(source_dir() / "docs" / "architecture.md");
  EXPECT_NE(doc.find("Frame header, " + std::to_string(sizeof(FrameHeader)) + " bytes"), std::string::npos);
  EXPECT_NE(doc.find("a " + std::to_string(kFileHeaderSize) + "-byte file header"), std::string::npos);
}

}  // namespace
}  // namespace cptrace
