// ZstdCsvWriter (user/tables/zstd_csv_writer.h): whatever the pieces the text
// comes in (single bytes, rows, pieces larger than its chunk), the file
// decompresses to exactly that text, and compressed on its own thread it is the
// same file; an empty table is a valid empty frame; a
// file cut short is refused by a reader; and the file is created as every
// output is, never through a name that exists.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tables/zstd_csv_writer.h"
#include "test_util.h"
#include "os/output_dir.h"
#include "zstd_util.h"

using namespace cptrace;
using namespace testutil;

namespace {

bool owns_nothing(const std::string&) { return false; }
const OutputKind kTestOutput{"test output", "t.csv.zst", owns_nothing};

// Rows like the export's: numbers that change from row to row.
std::string row(uint64_t i) { return "n1,true,user,chan," + std::to_string(i * 7919) + "," + std::to_string(i) + "\n"; }

}  // namespace

TEST(ZstdCsvWriter, AnyPiecesDecompressToTheText) {
  TempDir tmp;
  OutputDir dir(tmp / "out", kTestOutput, false);
  ZstdCsvWriter w(dir, "t.csv.zst");
  std::string text = "a,b\n";
  w.write(text);
  for (char c : std::string("x,1\n")) {  // single bytes
    w.write(std::string_view(&c, 1));
    text += c;
  }
  for (uint64_t i = 0; i < 20000; ++i) {  // rows: many times the chunk
    w.write(row(i));
    text += row(i);
  }
  std::string big;  // one piece larger than the chunk, and one not starting at a chunk boundary
  for (uint64_t i = 0; i < 30000; ++i) big += row(i * 3);
  w.write(big);
  w.write(big.substr(0, 100));
  w.write("");
  text += big + big.substr(0, 100);
  w.close();
  EXPECT_EQ(w.text_bytes(), text.size());
  std::string got = read_zst(tmp / "out/t.csv.zst");
  EXPECT_TRUE(got == text) << "decompressed " << got.size() << " bytes, wrote " << text.size();
  EXPECT_LT(fs::file_size(tmp / "out/t.csv.zst") * 4, text.size());
}

// Compressed on the writer's own thread (export table with room in --memory),
// the file is the same byte for byte as in the caller's thread, whatever the pieces.
TEST(ZstdCsvWriter, BackgroundWritesTheSameBytes) {
  TempDir tmp;
  std::string big;
  for (uint64_t i = 0; i < 30000; ++i) big += row(i * 3);
  for (bool background : {false, true}) {
    OutputDir dir(tmp / (background ? "bg" : "fg"), kTestOutput, false);
    ZstdCsvWriter w(dir, "t.csv.zst", ZstdCsvWriter::kLevel, background);
    w.write("a,b\n");
    for (uint64_t i = 0; i < 40000; ++i) w.write(row(i));
    w.write(big);
    w.write(big.substr(0, 100));
    w.close();
  }
  std::string fg = read_file(tmp / "fg/t.csv.zst"), bg = read_file(tmp / "bg/t.csv.zst");
  EXPECT_GT(fg.size(), 10000u);
  EXPECT_TRUE(fg == bg) << "foreground " << fg.size() << " bytes, background " << bg.size();
}

TEST(ZstdCsvWriter, EmptyTableIsAnEmptyFrame) {
  TempDir tmp;
  OutputDir dir(tmp / "out", kTestOutput, false);
  ZstdCsvWriter w(dir, "t.csv.zst");
  w.close();
  EXPECT_EQ(read_zst(tmp / "out/t.csv.zst"), "");
}

TEST(ZstdCsvWriter, CutShortFileIsRefusedByAReader) {
  TempDir tmp;
  {
    OutputDir dir(tmp / "out", kTestOutput, false);
    ZstdCsvWriter w(dir, "t.csv.zst");
    for (uint64_t i = 0; i < 20000; ++i) w.write(row(i));
    w.close();
  }
  std::string f = tmp / "out/t.csv.zst";
  ASSERT_EQ(::truncate(f.c_str(), static_cast<off_t>(fs::file_size(f) - 5)), 0);
  EXPECT_THROW(read_zst(f), std::runtime_error);
}

TEST(ZstdCsvWriter, RefusesANameThatExistsNamingIt) {
  TempDir tmp;
  OutputDir dir(tmp / "out", kTestOutput, false);
  fs::create_symlink(tmp / "victim", tmp / "out/t.csv.zst");
  try {
    ZstdCsvWriter w(dir, "t.csv.zst");
    FAIL() << "created a file through a symlink";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(tmp / "out/t.csv.zst"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp / "victim"));
}
