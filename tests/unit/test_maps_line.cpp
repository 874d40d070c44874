// /proc/PID/maps lines (probe/maps_line.h).
#include <gtest/gtest.h>
#include <sys/sysmacros.h>

#include "probe/maps_line.h"

namespace cptrace {
namespace {

// maps pads addresses to 8 digits; map_files/ names them without the padding
// (a non-PIE program at 0x400000). A path with spaces is kept whole.
TEST(MapsLine, FieldsAndTheMapFilesName) {
  auto m = parse_maps_line("00400000-00401000 r-xp 00001000 fe:01 10952987                   /opt/my app/bin");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->start, 0x400000u);
  EXPECT_EQ(m->end, 0x401000u);
  EXPECT_EQ(m->offset, 0x1000u);
  EXPECT_EQ(m->dev(), makedev(0xfe, 1));
  EXPECT_EQ(m->inode, 10952987u);
  EXPECT_TRUE(m->exec());
  EXPECT_TRUE(m->live_file());
  EXPECT_EQ(m->path, "/opt/my app/bin");
  EXPECT_EQ(m->map_files_name(), "400000-401000");
}

TEST(MapsLine, AnonymousDeletedAndBrokenLines) {
  auto anon = parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 ");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->path, "");
  EXPECT_FALSE(anon->live_file());
  auto heap = parse_maps_line("01b2c000-01b4d000 rw-p 00000000 00:00 0                          [heap]");
  ASSERT_TRUE(heap);
  EXPECT_FALSE(heap->live_file());
  auto gone = parse_maps_line("7f00-8f00 r-xp 00000000 08:01 42 /tmp/lib.so (deleted)");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->live_file());
  for (const char* bad :
       {"", "7f00-8f00", "7f00-8f00 r-x 0 08:01 42 /x", "8f00-7f00 r-xp 0 08:01 42 /x", "zz-8f00 r-xp 0 08:01 42 /x",
        "7f00-8f00 r-xp 0 0801 42 /x", "7f00-8f00 r-xp 0 08:01 -1 /x", "7f00-8f00 r-xp 0 08:01 42/x"})
    EXPECT_FALSE(parse_maps_line(bad)) << bad;
}

}  // namespace
}  // namespace cptrace
