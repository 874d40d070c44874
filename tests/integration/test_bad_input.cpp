// Bad input never crashes or hangs the cptrace program: each case runs the built
// binary on a damaged or hostile input and asserts a clear error (naming the
// flag and value, or the file and byte offset) and a non-zero exit, not a signal.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "cptrace.h"
#include "synthetic_trace.h"
#include "record_util.h"
#include "test_util.h"
#include "trace/trace_format.h"
#include "trace/trace_reader.h"

using namespace cptrace;
using namespace testutil;

namespace {

constexpr uint64_t O = SyntheticTrace::kOrigin;

// A one-node trace of 3000 events on two channels, in three Events frames.
void write_trace(const std::string& dir) {
  SyntheticTrace t;
  t.channels = {{11, "a"}, {12, "b"}};
  for (uint64_t i = 0; i < 3000; ++i) t.add(11 + i % 2, O + 1000 * i, i);
  t.write(dir);
}

std::string read_bytes(const std::string& p) { return read_file(p); }
void write_bytes(const std::string& p, const std::string& b) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << b;
}

// Offsets where each frame of events.cpt starts.
std::vector<size_t> frame_offsets(const std::string& b) {
  std::vector<size_t> offs;
  for (size_t off = kFileHeaderSize; off + sizeof(FrameHeader) <= b.size();) {
    FrameHeader h;
    std::memcpy(&h, b.data() + off, sizeof h);
    offs.push_back(off);
    off += sizeof h + h.payload_len;
  }
  return offs;
}

// Exit status of a command that must fail cleanly: non-zero, no signal, no hang.
void expect_clean_failure(const RunResult& r, const std::string& what) {
  EXPECT_NE(r.status, 0) << what << ": " << r.err;
  EXPECT_LT(r.status, 124) << what << ": killed by a signal or timed out: " << r.err;
}

}  // namespace

TEST(BadInput, RingMbNotANumberNamesFlagAndValue) {
  TempDir tmp;
  for (std::string v : {"abc", "99999999999999999999", "3", "0", "-4", "2048", "1e3"}) {
    auto r = run(cptrace_bin() + " record -o " + (tmp / "t") + " --ring-mb '" + v + "' -- true", tmp);
    expect_clean_failure(r, "--ring-mb " + v);
    EXPECT_NE(r.err.find("--ring-mb"), std::string::npos) << v << ": " << r.err;
    EXPECT_NE(r.err.find(v), std::string::npos) << v << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "t")) << v;
  }
}

// CLI11's NonNegativeNumber let nan through; the trace must not even be created.
TEST(BadInput, RecordDurationNotAFiniteNumberNamesFlagAndValue) {
  TempDir tmp;
  for (std::string v : {"nan", "NaN", "inf", "-inf", "-1", "1e999", "abc"}) {
    auto r = run(cptrace_bin() + " record -o " + (tmp / "t") + " --duration '" + v + "' -- true", tmp);
    expect_clean_failure(r, "--duration " + v);
    EXPECT_NE(r.err.find("--duration: " + v + " is not a"), std::string::npos) << v << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "t")) << v;
  }
}

// --min-windows is a count: -1 must not wrap into 2^64 - 1.
TEST(BadInput, RatesMinWindowsNegativeIsRefused) {
  TempDir tmp;
  write_trace(tmp / "t");
  std::string base = cptrace_bin() + " rates " + (tmp / "t") + " --channel-pair a,b --min-windows ";
  for (std::string v : {"-1", "-18446744073709551615"}) {
    auto r = run(base + v, tmp);
    expect_clean_failure(r, "--min-windows " + v);
    EXPECT_NE(r.err.find("--min-windows: " + v + " is negative"), std::string::npos) << r.err;
  }
  auto r = run(base + "2", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
}

// --pair FROM,TO is one option, parsed once: three names are refused (the
// report once took a,b,c as from a to "b,c"), with the same words in every
// command and under the spellings older scripts use, which --help no longer shows.
TEST(BadInput, PairOfThreeNamesIsRefusedAlikeEverywhere) {
  TempDir tmp;
  write_trace(tmp / "t");
  const std::string t = tmp / "t";
  const std::string want = "--pair 'a,b,c': expected FROM,TO (two channel names)";
  struct Case {
    std::string command, args;
  } cases[] = {
      {"report", t + " -o " + (tmp / "r.html") + " --pair a,b,c"},
      {"export", "table " + t + " -o " + (tmp / "x") + " --pair a,b,c"},
      {"rates", t + " --pair a,b,c"},
      {"rates", t + " --channel-pair a,b,c"},
      {"top", t + " --pair a,b,c --json --iterations 1"},
      {"top", t + " --pairs a,b,c --json --iterations 1"},
  };
  for (const Case& c : cases) {
    auto r = run(cptrace_bin() + " " + c.command + " " + c.args, tmp);
    expect_clean_failure(r, c.command + " " + c.args);
    EXPECT_EQ(r.err, "cptrace " + c.command + ": " + want + "\n") << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp / "r.html"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "x"));
  for (const char* command : {"report", "export table", "rates", "top"}) {
    auto help = run(cptrace_bin() + " " + command + " --help", tmp);
    EXPECT_EQ(help.status, 0) << command;
    EXPECT_NE(help.out.find("--pair"), std::string::npos) << command << ": " << help.out;
    EXPECT_EQ(help.out.find("--pairs"), std::string::npos) << command << ": " << help.out;
    EXPECT_EQ(help.out.find("--channel-pair"), std::string::npos) << command << ": " << help.out;
  }
  // The old spellings still pair: the same rates as under --pair.
  auto now = run(cptrace_bin() + " rates " + t + " --pair a,b --json", tmp);
  auto old = run(cptrace_bin() + " rates " + t + " --channel-pair a,b --json", tmp);
  ASSERT_EQ(now.status, 0) << now.err;
  EXPECT_EQ(old.status, 0) << old.err;
  EXPECT_EQ(old.out, now.out);
}

// A command with no probe site anywhere in its process tree: an empty trace,
// said once; a workload that logs gets no such line. The exit code stays the
// command's.
TEST(BadInput, RecordOfCommandWithoutProbeSiteSaysSoOnce) {
  REQUIRE_BPF();
  TempDir tmp;
  const std::string warning = "no probe site fired in /bin/true or its children";
  auto r = run(record_cmd(tmp / "t") + " -- /bin/true", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  size_t first = r.err.find(warning);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no probe site", first + 1), std::string::npos) << r.err;  // once
  r = run(record_cmd(tmp / "f") + " -- /bin/false", tmp);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("no probe site fired in /bin/false"), std::string::npos) << r.err;
  r = run(record_cmd(tmp / "w") + " -- " + workload() + " --threads 1 --events 100 --channels 2 --mode single", tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("102 events recorded"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no probe site"), std::string::npos) << r.err;
}

TEST(BadInput, WakeupAndBlockSizesOutOfRangeNameFlagAndValue) {
  TempDir tmp;
  // The default ring depends on the machine's memory: the wakeup beyond the
  // ring is tested against a ring given on the command line.
  struct Case {
    std::string flag, v, ring;
  };
  for (const auto& [flag, v, ring] : std::vector<Case>{{"--wakeup-kib", "abc", ""},
                                                       {"--wakeup-kib", "2", ""},
                                                       {"--wakeup-kib", "16385", " --ring-mb 16"},
                                                       {"--block-events", "1000", ""},
                                                       {"--block-events", "65537", ""},
                                                       {"--block-events", "-1", ""}}) {
    auto r = run(cptrace_bin() + " record -o " + (tmp / "t") + ring + " " + flag + " '" + v + "' -- true", tmp);
    expect_clean_failure(r, flag + " " + v);
    EXPECT_NE(r.err.find(flag), std::string::npos) << v << ": " << r.err;
    EXPECT_NE(r.err.find(v), std::string::npos) << v << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp / "t")) << v;
  }
}

// A FIFO in place of events.cpt or meta.json would block a reader forever (open
// waits for a writer); every command refuses it instead, naming the file.
TEST(BadInput, FifoInTraceDirIsRefusedNotWaitedOn) {
  TempDir tmp;
  for (std::string file : {"events.cpt", "meta.json"}) {
    std::string dir = tmp / ("fifo-" + file);
    write_trace(dir);
    std::filesystem::remove(dir + "/" + file);
    ASSERT_EQ(mkfifo((dir + "/" + file).c_str(), 0600), 0);
    for (std::string cmd :
         {"info " + dir, "dump " + dir, "translate " + dir + " --reference synth -o " + (tmp / "out")}) {
      auto r = run("timeout 30 " + cptrace_bin() + " " + cmd, tmp);
      expect_clean_failure(r, cmd);
      EXPECT_NE(r.err.find(dir + "/" + file), std::string::npos) << cmd << ": " << r.err;
      EXPECT_NE(r.err.find("not a regular file (a FIFO)"), std::string::npos) << cmd << ": " << r.err;
    }
  }
}

std::string translate_cmd(const std::string& dir, const TempDir& tmp) {
  return "timeout 60 " + cptrace_bin() + " translate " + dir + " --reference synth -f -o " + (tmp / "out");
}

TEST(BadInput, TranslateOfIntactTraceSucceeds) {
  TempDir tmp;
  write_trace(tmp / "t");
  auto r = run(translate_cmd(tmp / "t", tmp), tmp);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

// Flipped bytes anywhere in a frame, or a frame length that hides the frames
// after it: translate fails naming events.cpt and the byte offset of the frame.
TEST(BadInput, TranslateOfDamagedTraceFailsNamingFileAndOffset) {
  TempDir tmp;
  write_trace(tmp / "t");
  const std::string events = tmp / "t/events.cpt";
  const std::string good = read_bytes(events);
  std::vector<size_t> frames = frame_offsets(good);
  ASSERT_GE(frames.size(), 5u);  // clock, channels, 3 x events, counters...
  size_t f = frames[3];  // an Events frame with frames after it
  struct Damage {
    std::string name;
    size_t at;
    uint8_t mask;
  };
  std::vector<Damage> damages = {
      {"frame magic", f, 0x01},
      {"frame type", f + 4, 0x40},
      {"frame flags", f + 6, 0x80},
      {"payload_len grown past the file end", f + 11, 0x7f},
      {"payload_len shrunk", f + 8, 0x01},
      {"raw_len", f + 12, 0x01},
      {"stored crc", f + 20, 0x01},
      {"payload first byte", f + 24, 0xff},
      {"payload middle byte", f + 24 + (frames[4] - f - 24) / 2, 0x10},
  };
  for (const Damage& d : damages) {
    std::string b = good;
    b[d.at] = char(uint8_t(b[d.at]) ^ d.mask);
    write_bytes(events, b);
    auto r = run(translate_cmd(tmp / "t", tmp), tmp);
    expect_clean_failure(r, d.name);
    EXPECT_NE(r.err.find(events + " at byte " + std::to_string(f)), std::string::npos) << d.name << ": " << r.err;
  }
}

// A file cut inside its last frame is what a killed recorder leaves: translate
// uses the whole frames before the cut and says how many bytes it left out where.
TEST(BadInput, TranslateOfCutOffTraceWarnsWithBytesAndOffset) {
  TempDir tmp;
  write_trace(tmp / "t");
  const std::string events = tmp / "t/events.cpt";
  const std::string good = read_bytes(events);
  std::vector<size_t> frames = frame_offsets(good);
  ASSERT_GE(frames.size(), 5u);
  size_t f = frames[3];
  ASSERT_GT(frames[4] - f, 60u);
  for (size_t cut : {f + 5, f + 24, f + 60}) {  // in the header, at its end, in the payload
    write_bytes(events, good.substr(0, cut));
    auto r = run(translate_cmd(tmp / "t", tmp), tmp);
    EXPECT_EQ(r.status, 0) << "cut at " << cut << ": " << r.err;
    EXPECT_NE(r.err.find("last " + std::to_string(cut - f) + " bytes, from byte " + std::to_string(f)),
              std::string::npos)
        << "cut at " << cut << ": " << r.err;
  }
}

TEST(BadInput, TranslateWithBrokenOrMissingMetaJsonFailsNamingIt) {
  TempDir tmp;
  write_trace(tmp / "t");
  const std::string meta = tmp / "t/meta.json";
  const std::string cut_json = "{\"node\": \"synth\", \"start\": {";
  write_bytes(meta, cut_json);
  auto r = run(translate_cmd(tmp / "t", tmp), tmp);
  expect_clean_failure(r, "broken meta.json");
  // The parser fails at the end of the file, where a key should follow.
  EXPECT_NE(r.err.find(meta + " at byte " + std::to_string(cut_json.size()) + ": not valid JSON"), std::string::npos)
      << r.err;
  std::filesystem::remove(meta);
  r = run(translate_cmd(tmp / "t", tmp), tmp);
  expect_clean_failure(r, "missing meta.json");
  EXPECT_NE(r.err.find(meta + ": missing"), std::string::npos) << r.err;
}

// libbpf reports a file that is not ELF as "Unknown error 4001"; record names
// the --lib path and what is wrong with it, before loading anything.
TEST(BadInput, LibThatIsNotAnInstrumentedElfIsNamed) {
  TempDir tmp;
  auto r = run(cptrace_bin() + " record -o " + (tmp / "t") + " --lib /etc/passwd -- true", tmp);
  expect_clean_failure(r, "--lib /etc/passwd");
  EXPECT_NE(r.err.find("--lib /etc/passwd: not an ELF"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Unknown error"), std::string::npos) << r.err;
  r = run(cptrace_bin() + " record -o " + (tmp / "t") + " --lib /bin/true -- true", tmp);
  expect_clean_failure(r, "--lib /bin/true");
  EXPECT_NE(r.err.find("--lib /bin/true: an ELF file without a cp_logTS symbol"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "t"));
}

// RFC 4180 quoting of channel (and node) names in `dump --csv`, as `export csv` does.
TEST(BadInput, DumpCsvQuotesChannelNames) {
  TempDir tmp;
  SyntheticTrace t;
  t.channels = {{11, "a,b \"c\""}};
  t.add(11, O + 5, 7);
  t.write(tmp / "t");
  auto r = run(cptrace_bin() + " dump --csv " + (tmp / "t"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("synth,user,1000000000005,\"a,b \"\"c\"\"\",7,"), std::string::npos) << r.out;
}

// Names longer than the recorder keeps (CP_CHANNEL_NAME_MAX-1 bytes) reach the
// trace cut; their ids, hashes of the full names, keep them apart: distinct
// labels, and --channel with the full name finds exactly its channel.
TEST(BadInput, LongChannelNamesDifferingAfterTheCutStayDistinct) {
  TempDir tmp;
  std::string a(65536, 'x'), b(65536, 'x');
  a.back() = 'a', b.back() = 'b';
  const uint64_t ia = cp_channel_id(a.c_str()), ib = cp_channel_id(b.c_str());
  ASSERT_NE(ia, ib);
  const std::string cut = a.substr(0, CP_CHANNEL_NAME_MAX - 1);
  SyntheticTrace t;
  t.channels = {{ia, cut}, {ib, cut}};
  for (uint64_t i = 0; i < 30; ++i) t.add(i < 10 ? ia : ib, O + 1000 * i, i);
  t.write(tmp / "t");
  auto r = run(cptrace_bin() + " dump --csv " + (tmp / "t"), tmp);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(fmt::format(",{}...[0x{:016x}],", cut, ia)), std::string::npos) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find(fmt::format(",{}...[0x{:016x}],", cut, ib)), std::string::npos) << r.out.substr(0, 400);
  for (auto [name, want] : {std::pair{a, 10}, std::pair{b, 20}}) {
    write_bytes(tmp / "name", name);
    r = run(cptrace_bin() + " throughput --json --channel \"$(cat " + (tmp / "name") + ")\" " + (tmp / "t"), tmp);
    ASSERT_EQ(r.status, 0) << r.err.substr(0, 400);
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["channels"].size(), 1u) << r.out.substr(0, 400);
    EXPECT_EQ(j["channels"][0]["id"].get<uint64_t>(), name == a ? ia : ib);
    EXPECT_EQ(j["channels"][0]["total"].get<int>(), want);
  }
}

// The control socket (OUT/control.sock) sits beyond sockaddr_un's 107 bytes when
// -o is long; record still works, and `cptrace config` reaches it.
TEST(BadInput, RecordIntoLongOutputPathWorks) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string dir = tmp.path.string();
  while (dir.size() < 200) dir += "/" + std::string(40, 'd');
  std::filesystem::create_directories(dir);
  std::string out = dir + "/trace";
  ASSERT_GT(out.size() + std::string("/control.sock").size(), 108u);
  Proc w(workload() + " --threads 1 --events 1000 --channels 2 --mode single --wait-signal", tmp / "w.out",
         tmp / "w.err");
  ASSERT_TRUE(w.wait_for("READY", 20)) << read_file(tmp / "w.err");
  Proc rec(record_cmd(out) + " -p " + std::to_string(w.pid), tmp / "r.out", tmp / "r.err");
  ASSERT_TRUE(attached(rec));
  auto c = run(cptrace_bin() + " config " + out + " get", tmp);
  EXPECT_EQ(c.status, 0) << c.err;
  kill(w.pid, SIGUSR1);
  EXPECT_EQ(w.wait(), 0);
  EXPECT_EQ(rec.wait(), 0) << read_file(tmp / "r.err");
  auto i = run(cptrace_bin() + " info " + out, tmp);
  EXPECT_EQ(i.status, 0) << i.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/control.sock"));
}

// A --control-socket whose file name cannot fit sockaddr_un (even through its
// directory's descriptor) is refused, naming it, before the trace directory
// exists: nothing is left behind to clean up.
TEST(BadInput, ControlSocketNameTooLongIsRefusedBeforeTheTraceExists) {
  REQUIRE_BPF();
  TempDir tmp;
  std::string sock = tmp / std::string(150, 's');
  std::string out = tmp / "trace";
  auto r = run(record_cmd(out, "--duration 1") + " --control-socket " + sock + " -- " + workload() +
                   " --threads 1 --events 10 --channels 1 --mode single",
               tmp);
  expect_clean_failure(r, "long --control-socket");
  EXPECT_NE(r.err.find("control socket " + sock), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("longer than"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out)) << "the trace directory was created before the refusal";
}

// `record -- CMD` runs as root and looks up the command's libraries: a program
// whose path holds a quote and shell syntax must be recorded, never run as
// shell commands. The libcptrace.so the copy loads sits in the same hostile
// directory (found through the workload's RUNPATH, $ORIGIN/..), so recording
// its events also proves the libraries are found on such a path.
TEST(BadInput, CommandPathWithShellSyntaxIsNotRunByAShell) {
  REQUIRE_BPF();
  TempDir tmp;
  fs::path evil = tmp.path / "x';touch PWNED;'";
  fs::create_directories(evil / "tests");
  fs::copy_file(build_dir() / "tests" / "workload", evil / "tests" / "workload");
  fs::copy_file(build_dir() / "libcptrace.so", evil / "libcptrace.so");
  // Double quotes: the test's own shell passes the name through unchanged.
  auto r = run("cd " + tmp.path.string() + " && " + record_cmd(tmp / "t") + " -- \"" +
                   (evil / "tests" / "workload").string() + "\" --threads 1 --events 10 --channels 1",
               tmp);
  EXPECT_FALSE(fs::exists(tmp / "PWNED")) << "the program path was run by a shell";
  EXPECT_FALSE(fs::exists(fs::current_path() / "PWNED")) << "the program path was run by a shell";
  ASSERT_EQ(r.status, 0) << r.err;
  TraceReader tr(tmp / "t");
  ASSERT_FALSE(tr.error()) << tr.error()->what();
  uint64_t user = 0;
  tr.for_each_event([&](const TraceEvent& e) { user += e.kind == uint8_t(EventKind::User); });
  EXPECT_EQ(user, 10u) << "the workload's libcptrace.so in the quoted directory was not probed";
}
