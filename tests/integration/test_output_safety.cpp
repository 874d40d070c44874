// Output files are created safely: no command that writes follows a symlink
// planted at a name it writes (the attacker is a local user who can write into
// the output's directory, cptrace runs as root), an existing directory that is
// not empty is refused without -f, and -f removes only the output's own files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "synthetic_trace.h"
#include "record_util.h"
#include "test_util.h"

using namespace cptrace;
using namespace testutil;

namespace {

constexpr const char* kSecret = "root-only secret\n";

// A one-node trace for the offline commands to read.
std::string input_trace(const TempDir& tmp) {
  std::string dir = tmp / "in";
  SyntheticTrace t;
  t.channels = {{11, "a"}, {12, "b"}};
  for (uint64_t i = 0; i < 200; ++i) t.add(11 + i % 2, SyntheticTrace::kOrigin + 1000 * i, i);
  t.write(dir);
  return dir;
}

// A file only root may read or write, which the attacker wants overwritten.
std::string make_victim(const TempDir& tmp) {
  std::string v = tmp / "victim";
  std::ofstream(v) << kSecret;
  ::chmod(v.c_str(), 0600);
  return v;
}

void expect_victim_intact(const std::string& victim, const std::string& what) {
  EXPECT_EQ(read_file(victim), kSecret) << what;
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0) << what;
  EXPECT_EQ(st.st_mode & 07777, 0600u) << what;
}

// A command writing a directory, and the names it writes there.
struct DirWriter {
  std::string name;
  std::string cmd;  // with {out} for the output directory
  std::vector<std::string> files;
  bool must_succeed;  // sync needs a peer: it fails either way, after refusing or not
};

std::vector<DirWriter> dir_writers(const TempDir& tmp) {
  std::string in = input_trace(tmp);
  std::string bin = cptrace_bin();
  // export table reads a translated trace.
  std::string translated = tmp / "translated";
  EXPECT_EQ(run(bin + " translate " + in + " --reference synth -o " + translated, tmp).status, 0);
  return {
      {"record", record_cmd("{out}", "-- /bin/true"), {"meta.json", "meta.json.tmp", "events.cpt"}, true},
      {"translate",
       bin + " translate " + in + " --reference synth -o {out}",
       {"meta.json", "meta.json.tmp", "events.cpt"},
       true},
      {"sync",
       bin + " sync --insecure --peers 127.0.0.1:9 --sync-rounds 1 --sync-wait 0 -o {out}",
       {"meta.json", "meta.json.tmp", "events.cpt"},
       false},
      {"export ctf", bin + " export ctf " + in + " -o {out}", {"metadata", "metadata.tmp", "stream_0"}, true},
      {"export table",
       bin + " export table " + translated + " --pair a,b -o {out}",
       {"latency.csv.zst", "events.csv", "events.csv.zst"},
       true},
      {"export table --plain",
       bin + " export table " + translated + " --pair a,b --plain -o {out}",
       {"latency.csv", "events.csv.zst", "events.csv"},
       true},
      {"export table --parquet",
       bin + " export table " + translated + " --pair a,b --parquet -o {out}",
       {"latency.parquet", "events.csv.zst", "events.parquet"},
       true},
  };
}

std::string with_out(std::string cmd, const std::string& out, bool force) {
  cmd.replace(cmd.find("{out}"), 5, out + (force ? " -f" : ""));
  return "timeout 60 " + cmd;
}

bool is_symlink(const std::string& p) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(p, ec));
}

}  // namespace

// A symlink planted at each name a command writes, to a root-only file and
// dangling: without -f the directory is refused (it is not empty) and the link
// left as it was; with -f the link itself is removed, never followed.
TEST(OutputSafety, DirectoryWritersNeverFollowAPlantedSymlink) {
  TempDir tmp;
  std::string victim = make_victim(tmp);
  for (const auto& w : dir_writers(tmp))
    for (const auto& name : w.files)
      for (bool dangling : {false, true})
        for (bool force : {false, true}) {
          std::string what = w.name + " with " + name + (dangling ? " dangling" : " -> victim") + (force ? " -f" : "");
          std::string out = tmp / "out", target = dangling ? tmp / "created" : victim;
          fs::remove_all(out);
          fs::create_directory(out);
          fs::create_symlink(target, out + "/" + name);
          auto r = run(with_out(w.cmd, out, force), tmp);
          EXPECT_LT(r.status, 124) << what << ": " << r.err;
          expect_victim_intact(victim, what);
          EXPECT_FALSE(fs::exists(tmp / "created")) << what << ": the dangling link's target was created";
          if (!force) {
            EXPECT_NE(r.status, 0) << what;
            EXPECT_NE(r.err.find(out), std::string::npos) << what << ": " << r.err;
            EXPECT_TRUE(is_symlink(out + "/" + name)) << what << ": the link was touched";
          } else if (w.must_succeed) {
            EXPECT_EQ(r.status, 0) << what << ": " << r.err;
            EXPECT_FALSE(is_symlink(out + "/" + name)) << what;
          }
        }
}

// -o naming a symlink to a directory: refused, nothing written through it.
TEST(OutputSafety, OutputDirectoryThatIsASymlinkIsRefused) {
  TempDir tmp;
  for (const auto& w : dir_writers(tmp)) {
    std::string real = tmp / "real", link = tmp / "link";
    fs::remove_all(real);
    fs::remove(link);
    fs::create_directory(real);
    fs::create_directory_symlink(real, link);
    auto r = run(with_out(w.cmd, link, true), tmp);
    EXPECT_NE(r.status, 0) << w.name;
    EXPECT_LT(r.status, 124) << w.name << ": " << r.err;
    EXPECT_NE(r.err.find(link + ": is a symlink"), std::string::npos) << w.name << ": " << r.err;
    EXPECT_TRUE(fs::is_empty(real)) << w.name;
  }
}

// An existing directory that is not a trace (here holding a meta.json of its
// own) is refused without -f and left as it was.
TEST(OutputSafety, NonTraceDirectoryRefusedWithoutForce) {
  TempDir tmp;
  for (const auto& w : dir_writers(tmp)) {
    std::string out = tmp / "mine";
    fs::remove_all(out);
    fs::create_directory(out);
    std::ofstream(out + "/meta.json") << "my own notes\n";
    std::ofstream(out + "/metadata") << "my own metadata\n";
    auto r = run(with_out(w.cmd, out, false), tmp);
    EXPECT_NE(r.status, 0) << w.name;
    EXPECT_NE(r.err.find(out + ": "), std::string::npos) << w.name << ": " << r.err;
    EXPECT_NE(r.err.find("use -f"), std::string::npos) << w.name << ": " << r.err;
    EXPECT_EQ(read_file(out + "/meta.json"), "my own notes\n") << w.name;
    EXPECT_EQ(read_file(out + "/metadata"), "my own metadata\n") << w.name;
    EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 2) << w.name;
  }
}

// -f onto an existing output removes only its own files: a file of someone
// else's survives, a symlink planted at one of its names is removed, not followed.
TEST(OutputSafety, ForceRemovesOnlyTheOutputsOwnFiles) {
  TempDir tmp;
  std::string victim = make_victim(tmp);
  for (const auto& w : dir_writers(tmp)) {
    if (!w.must_succeed) continue;
    std::string out = tmp / "out";
    fs::remove_all(out);
    auto r = run(with_out(w.cmd, out, false), tmp);
    ASSERT_EQ(r.status, 0) << w.name << ": " << r.err;
    std::ofstream(out + "/keep.txt") << "keep me\n";
    std::string planted = out + "/" + w.files[2];  // events.cpt, stream_0, the events table
    fs::remove(planted);
    fs::create_symlink(victim, planted);
    r = run(with_out(w.cmd, out, false), tmp);
    EXPECT_NE(r.status, 0) << w.name << ": overwrote an existing output without -f";
    r = run(with_out(w.cmd, out, true), tmp);
    EXPECT_EQ(r.status, 0) << w.name << ": " << r.err;
    EXPECT_EQ(read_file(out + "/keep.txt"), "keep me\n") << w.name;
    EXPECT_FALSE(is_symlink(planted)) << w.name;
    EXPECT_TRUE(fs::is_regular_file(planted)) << w.name;
    expect_victim_intact(victim, w.name);
  }
}

// Single-file outputs (report, json and csv export): a symlink at the file's
// name is refused with an error naming it, with or without -f; the target is
// neither written nor created. A FIFO there is refused without blocking.
TEST(OutputSafety, SingleFileWritersRefuseASymlink) {
  TempDir tmp;
  std::string in = input_trace(tmp), victim = make_victim(tmp), bin = cptrace_bin();
  std::vector<std::pair<std::string, std::string>> cmds = {
      {"report", bin + " report " + in + " -o {out}"},
      {"export json", bin + " export json " + in + " -o {out}"},
      {"export csv", bin + " export csv " + in + " -o {out}"},
      {"export json -f", bin + " export json " + in + " -f -o {out}"},
      {"export csv -f", bin + " export csv " + in + " -f -o {out}"},
  };
  for (const auto& [name, cmd] : cmds)
    for (bool dangling : {false, true}) {
      std::string what = name + (dangling ? " dangling" : " -> victim");
      std::string out = tmp / "out.file";
      fs::remove(out);
      fs::create_symlink(dangling ? tmp / "created" : victim, out);
      auto r = run(with_out(cmd, out, false), tmp);
      EXPECT_NE(r.status, 0) << what;
      EXPECT_LT(r.status, 124) << what << ": " << r.err;
      EXPECT_NE(r.err.find(out), std::string::npos) << what << ": " << r.err;
      EXPECT_TRUE(is_symlink(out)) << what;
      expect_victim_intact(victim, what);
      EXPECT_FALSE(fs::exists(tmp / "created")) << what;
    }
  // Still writes an ordinary file, and replaces it.
  for (int i = 0; i < 2; ++i) {
    std::string out = tmp / "r.html";
    auto r = run(with_out(bin + " report " + in + " -o {out}", out, false), tmp);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_GT(fs::file_size(out), 0u);
  }
  std::string fifo = tmp / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = run(with_out(bin + " report " + in + " -o {out}", fifo, false), tmp);
  EXPECT_NE(r.status, 0);
  EXPECT_LT(r.status, 124) << r.err;
  EXPECT_NE(r.err.find(fifo), std::string::npos) << r.err;
}
