// libcptrace: probe-site bytes, channel ids, the process registry (in process
// and read from another process), and that batches reach cp_batch_submit.
//
// Whether a probe site is *called* is checked the way the recorder sees it: a
// real uprobe (perf_event_open on the uprobe PMU, sampling rdi/rsi at every
// hit), not a counter inside the library or an interposed symbol. Those tests
// skip where perf uprobes are not permitted (they need root/CAP_PERFMON).
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asm/perf_regs.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <x86intrin.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cptrace.h"
#include "cptrace_probe_site.h"
#include "cptrace_registry.h"
#include "probe/probe_site.h"
#include "probe/proc_registry.h"
#include "test_util.h"

extern "C" char** environ;

namespace {

using cptrace::ChannelEntry;
using Bytes = std::vector<uint8_t>;

// Every probe site as lib/probe_site.h emits it: the TSC stamp, the nop the
// uprobe goes on, ret (include/cptrace_probe_site.h, which the recorder checks).
const Bytes kSite = [] {
  Bytes b = {CP_SITE_STAMP_BYTES};
  for (uint8_t x : {CP_SITE_NOP_BYTES}) b.push_back(x);
  b.push_back(CP_SITE_RET);
  return b;
}();
const Bytes kNop = {CP_SITE_NOP_BYTES};
const char* const kProbeSites[] = {"cp_logTS_site", "cp_batch_submit", "cp_batch_submit_for", "cp_channel_announce",
                                   "cp_channel_closed"};

// ---- where things are ---------------------------------------------------------

std::string exe_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// The libcptrace.so this process runs (the build links it from its own dir).
std::string libcptrace_so_path() {
  Dl_info info{};
  void* sym = dlsym(RTLD_DEFAULT, "cp_open_channel");
  if (!sym || !dladdr(sym, &info) || !info.dli_fname) return {};
  return info.dli_fname;
}

void* libcptrace_handle() {
  static void* h = dlopen(libcptrace_so_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  return h;
}

// cp_logTS's own probe site, called directly: cp_logTS itself buffers single
// events unless CPTRACE_SINGLE=site was set when the library loaded
// (lib/single_route.c), and these tests are about the site.
void site_logTS(uint64_t channel, uint64_t tuple) {
  static auto fn = reinterpret_cast<void (*)(uint64_t, uint64_t)>(dlsym(libcptrace_handle(), "cp_logTS_site"));
  fn(channel, tuple);
}

bool file_exists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }

// ---- bytes of functions ----------------------------------------------------------

Bytes memory_bytes(const void* p, size_t n) {
  auto b = static_cast<const uint8_t*>(p);
  return Bytes(b, b + n);
}

std::optional<Bytes> file_bytes(const std::string& path, uint64_t offset, size_t n) {
  std::ifstream in(path, std::ios::binary);
  Bytes b(n);
  if (!in.seekg(static_cast<std::streamoff>(offset)) ||
      !in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(n)))
    return std::nullopt;
  return b;
}

// First `n` bytes of the defined symbol `name` in the relocatable object `m`.
std::optional<Bytes> object_symbol_bytes(Elf* m, const std::string& name, size_t n) {
  for (Elf_Scn* scn = elf_nextscn(m, nullptr); scn; scn = elf_nextscn(m, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize) continue;
    Elf_Data* syms = elf_getdata(scn, nullptr);
    for (size_t i = 1; syms && i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Sym s;
      if (!gelf_getsym(syms, static_cast<int>(i), &s) || s.st_shndx == SHN_UNDEF) continue;
      const char* sname = elf_strptr(m, sh.sh_link, s.st_name);
      if (!sname || name != sname) continue;
      Elf_Data* text = elf_getdata(elf_getscn(m, s.st_shndx), nullptr);
      if (!text || !text->d_buf || s.st_value + n > text->d_size) return std::nullopt;
      return memory_bytes(static_cast<const uint8_t*>(text->d_buf) + s.st_value, n);
    }
  }
  return std::nullopt;
}

// First `n` bytes of `name` in whichever member of the ar archive defines it.
std::optional<Bytes> archive_symbol_bytes(const std::string& archive, const std::string& name, size_t n) {
  elf_version(EV_CURRENT);
  int fd = open(archive.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<Bytes> found;
  Elf* ar = elf_begin(fd, ELF_C_READ, nullptr);
  Elf_Cmd cmd = ELF_C_READ;
  while (ar && !found) {
    Elf* m = elf_begin(fd, cmd, ar);
    if (!m) break;
    if (elf_kind(m) == ELF_K_ELF) found = object_symbol_bytes(m, name, n);
    cmd = elf_next(m);
    elf_end(m);
  }
  if (ar) elf_end(ar);
  close(fd);
  return found;
}

// ---- child processes ------------------------------------------------------------

// A spawned program whose stdout we read; killed on scope exit if still running.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    out_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of the child's stdout, or nullopt after `timeout_ms`/EOF.
  std::optional<std::string> read_line(int timeout_ms = 10000) {
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
      char tmp[4096];
      ssize_t n = read(out_, tmp, sizeof(tmp));
      if (n <= 0) return std::nullopt;
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }

  // Exit status as from waitpid.
  int wait() {
    int status = -1;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buf_;
};

// ---- a real uprobe on a probe site -----------------------------------------------

struct Hit {
  uint32_t pid = 0, tid = 0;
  uint64_t rdi = 0, rsi = 0, rdx = 0, rcx = 0;  // first four arguments of the probe site
  uint64_t rax = 0;  // the site's TSC stamp
};

// Samples rax/rdi/rsi/rdx at every execution of the nop of the probe site
// `symbol` in `elf` (where the recorder attaches), as the recorder's
// BPF program would see it: by one thread (`tid`) or, with kAllProcesses, by
// every process (the caller filters). Never inherited into new threads or
// children: the kernel copies config1 (a pointer into *our* memory) again in
// the forking process, so clone() in another process fails with EFAULT, and an
// inherited event closing at a child's exit can take the probe away from the
// parent too. Tests instead start a thread or child that waits, attach to it,
// then let it run.
class UprobeSampler {
 public:
  static constexpr pid_t kAllProcesses = -1;

  UprobeSampler(const std::string& elf, const std::string& symbol, pid_t tid) : path_(elf) {
    auto off = cptrace::probe_site_file_offset(elf, symbol);  // the site's nop
    int type = uprobe_pmu_type();
    if (!off || type < 0) {
      error_ = !off ? "no symbol " + symbol : "no uprobe PMU";
      return;
    }
    if (tid != kAllProcesses) {
      open_one(type, *off, tid, -1);
      return;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    for (int cpu = 0; cpu < ncpu; cpu++) open_one(type, *off, -1, cpu);
    if (rings_.empty() && error_.empty()) error_ = "no CPU";
  }
  ~UprobeSampler() {
    for (auto& r : rings_) {
      munmap(r.base, r.len);
      close(r.fd);
    }
  }
  UprobeSampler(const UprobeSampler&) = delete;
  UprobeSampler& operator=(const UprobeSampler&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // Samples the kernel could not store (ring full) so far.
  uint64_t lost() const { return lost_; }

  std::vector<Hit> drain() {
    std::vector<Hit> hits;
    for (auto& r : rings_) drain_ring(r, hits);
    return hits;
  }

 private:
  static constexpr size_t kDataPages = 256;
  struct Ring {
    int fd;
    void* base;
    size_t len;
  };

  static int uprobe_pmu_type() {
    std::ifstream in("/sys/bus/event_source/devices/uprobe/type");
    int t = -1;
    return in >> t ? t : -1;
  }

  void open_one(int type, uint64_t offset, pid_t pid, int cpu) {
    perf_event_attr a{};
    a.size = sizeof(a);
    a.type = static_cast<uint32_t>(type);
    a.config1 = reinterpret_cast<uint64_t>(path_.c_str());
    a.config2 = offset;
    a.sample_period = 1;
    a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER;
    a.sample_regs_user = (1ull << PERF_REG_X86_AX) | (1ull << PERF_REG_X86_CX) | (1ull << PERF_REG_X86_DX) |
                         (1ull << PERF_REG_X86_SI) | (1ull << PERF_REG_X86_DI);
    int fd = static_cast<int>(syscall(SYS_perf_event_open, &a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      // An offline CPU is not an error.
      if (cpu < 0 || (errno != ENODEV && errno != ENXIO)) error_ = std::string("perf_event_open: ") + strerror(errno);
      return;
    }
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t len = (kDataPages + 1) * page;
    void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      error_ = std::string("mmap: ") + strerror(errno);
      close(fd);
      return;
    }
    rings_.push_back({fd, base, len});
  }

  void drain_ring(Ring& r, std::vector<Hit>& hits) {
    auto* meta = static_cast<perf_event_mmap_page*>(r.base);
    const uint8_t* data = static_cast<const uint8_t*>(r.base) + meta->data_offset;
    const uint64_t size = meta->data_size;
    uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    while (tail < head) {
      perf_event_header h;
      copy_wrapped(data, size, tail, &h, sizeof(h));
      std::vector<uint8_t> rec(h.size);
      copy_wrapped(data, size, tail, rec.data(), h.size);
      if (h.type == PERF_RECORD_SAMPLE) hits.push_back(parse_sample(rec.data() + sizeof(h)));
      if (h.type == PERF_RECORD_LOST) lost_ += parse_lost(rec.data() + sizeof(h));
      tail += h.size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }

  static void copy_wrapped(const uint8_t* data, uint64_t size, uint64_t pos, void* dst, size_t n) {
    for (size_t i = 0; i < n; i++) static_cast<uint8_t*>(dst)[i] = data[(pos + i) % size];
  }

  // PERF_SAMPLE_TID: u32 pid, tid; PERF_SAMPLE_REGS_USER: u64 abi, then the
  // requested registers in bit order (AX, CX, DX, SI, DI).
  static Hit parse_sample(const uint8_t* p) {
    Hit hit;
    uint64_t regs[6];
    memcpy(&hit.pid, p, 4);
    memcpy(&hit.tid, p + 4, 4);
    memcpy(regs, p + 8, sizeof(regs));
    hit.rax = regs[1];
    hit.rcx = regs[2];
    hit.rdx = regs[3];
    hit.rsi = regs[4];
    hit.rdi = regs[5];
    return hit;
  }

  // PERF_RECORD_LOST: u64 id, u64 lost.
  static uint64_t parse_lost(const uint8_t* p) {
    uint64_t n;
    memcpy(&n, p + 8, sizeof(n));
    return n;
  }

  std::string path_;  // must outlive perf_event_open (config1 points at it)
  std::vector<Ring> rings_;
  std::string error_;
  uint64_t lost_ = 0;
};

#define REQUIRE_SAMPLER(s)                                                      \
  do {                                                                          \
    if (!(s).ok()) GTEST_SKIP() << "perf uprobes unavailable: " << (s).error(); \
  } while (0)

// Sizes of the hand-overs; a call with n == 0 only names (or forgets) the
// thread's buffer for the exit path and hands nothing over.
// cp_batch_submit's n: the count, and above it 1 + the CPU of the stamps
// (include/cptrace_records.h).
uint32_t batch_count(const Hit& h) { return static_cast<uint32_t>(h.rsi) & CP_BATCH_COUNT_MASK; }
uint32_t batch_stamp_cpu1(const Hit& h) { return static_cast<uint32_t>(h.rsi) >> CP_BATCH_CPU_SHIFT; }

std::vector<uint64_t> batch_sizes(const std::vector<Hit>& hits) {
  std::vector<uint64_t> n;
  for (const Hit& h : hits)
    if (batch_count(h) != 0) n.push_back(batch_count(h));
  return n;
}

pid_t gettid_i() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void pin_to_cpu(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0) << strerror(errno);
}

// The calling thread on CPU 0 while it lives: a buffer holds one CPU's stamps
// (lib/batch.c), so a thread that moves hands over early, and tests counting
// hand-overs must not move.
class OnCpu0 {
 public:
  OnCpu0() {
    sched_getaffinity(0, sizeof before_, &before_);
    pin_to_cpu(0);
  }
  ~OnCpu0() { sched_setaffinity(0, sizeof before_, &before_); }

 private:
  cpu_set_t before_;
};

// ---- registry helpers -----------------------------------------------------------

std::vector<const cp_registry_entry*> registry_entries_named(const std::string& name) {
  std::vector<const cp_registry_entry*> out;
  uint32_t n = __atomic_load_n(&cptrace_registry.count, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; i++)
    if (name == cptrace_registry.entries[i].name) out.push_back(&cptrace_registry.entries[i]);
  return out;
}

const ChannelEntry* find_entry(const std::vector<ChannelEntry>& v, const std::string& name) {
  for (const auto& e : v)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

// ==== probe-site bytes ==============================================================

// The macro (lib/probe_site.h) and the bytes the recorder checks
// (include/cptrace_probe_site.h) are written in two places: they must agree.
TEST(ProbeSites, ExportedSymbolsAreStampedSites) {
  void* h = libcptrace_handle();
  ASSERT_NE(h, nullptr) << dlerror();
  for (const char* name : kProbeSites) {
    // dlsym on the library's handle: the definition in libcptrace.so itself,
    // never a PLT stub of the test executable.
    void* sym = dlsym(h, name);
    ASSERT_NE(sym, nullptr) << name;
    EXPECT_EQ(memory_bytes(sym, kSite.size()), kSite) << name;
  }
}

TEST(ProbeSites, SharedLibraryFileHasTheSiteAtSymbolOffset) {
  std::string so = libcptrace_so_path();
  ASSERT_FALSE(so.empty());
  for (const char* name : kProbeSites) {
    auto off = cptrace::elf_symbol_file_offset(so, name);
    ASSERT_TRUE(off.has_value()) << name;
    EXPECT_EQ(file_bytes(so, *off, kSite.size()), std::optional<Bytes>(kSite)) << name;
    uint64_t nop = *off + CP_SITE_NOP_OFFSET;
    EXPECT_EQ(nop % 8, 0u) << name << ": the nop must be 8-byte aligned (within one page)";
    EXPECT_EQ(cptrace::probe_site_file_offset(so, name), std::optional<uint64_t>(nop)) << name;
  }
  EXPECT_EQ(cptrace::probe_site_file_offset(so, "no_such_symbol_xyz"), std::nullopt);
}

TEST(ProbeSites, StaticLibraryObjectHasTheSite) {
  std::string ar = exe_dir() + "/libcptrace.a";
  if (!file_exists(ar)) GTEST_SKIP() << ar << " not built";
  for (const char* name : kProbeSites)
    EXPECT_EQ(archive_symbol_bytes(ar, name, kSite.size()), std::optional<Bytes>(kSite)) << name;
}

// A cp_logTS built before the stamp (a bare `nop5; ret`), and a function of
// that name that is no site at all: refused, naming the file and the symbol.
TEST(ProbeSites, SiteWithoutTheStampIsRefused) {
  char dir[] = "/tmp/cp_old_site_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string src = std::string(dir) + "/old.S", so = std::string(dir) + "/libold.so";
  std::ofstream(src) << R"(.text
.p2align 4
.globl cp_logTS
.type cp_logTS,@function
cp_logTS:
.byte 0x0f,0x1f,0x44,0x00,0x00
ret
.size cp_logTS,.-cp_logTS
.p2align 4
.globl cp_channel_closed
.type cp_channel_closed,@function
cp_channel_closed:
xor %eax,%eax
ret
.size cp_channel_closed,.-cp_channel_closed
.section .note.GNU-stack,"",@progbits
)";
  std::string cmd = "cc -shared -fPIC -o " + so + " " + src;
  ASSERT_EQ(system(cmd.c_str()), 0) << cmd;
  for (const char* sym : {"cp_logTS", "cp_channel_closed"}) {
    try {
      cptrace::probe_site_file_offset(so, sym);
      ADD_FAILURE() << sym << ": accepted without the stamp";
    } catch (const cptrace::ProbeSiteError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(so), std::string::npos) << m;
      EXPECT_NE(m.find(std::string(sym) + " is not a cptrace probe site"), std::string::npos) << m;
      EXPECT_EQ(m.find("built before the stamp") != std::string::npos, std::string(sym) == "cp_logTS") << m;
    }
  }
  unlink(so.c_str());
  unlink(src.c_str());
  rmdir(dir);
}

TEST(ElfSymbolFileOffset, MissingSymbolAndFile) {
  EXPECT_EQ(cptrace::elf_symbol_file_offset(libcptrace_so_path(), "no_such_symbol_xyz"), std::nullopt);
  // .bss has no file bytes, so no offset.
  EXPECT_EQ(cptrace::elf_symbol_file_offset(libcptrace_so_path(), "cptrace_registry"), std::nullopt);
  EXPECT_THROW(cptrace::elf_symbol_file_offset("/nonexistent/lib.so", "cp_logTS"), cptrace::ProcRegistryError);
}

// ==== channel ids =====================================================================

TEST(ChannelId, IsFnv1a64OfTheName) {
  // Reference values of 64-bit FNV-1a.
  EXPECT_EQ(cp_channel_id(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(cp_channel_id("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(cp_channel_id("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(cp_open_channel("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(cp_open_channel(nullptr), 0xcbf29ce484222325ull);
}

TEST(ChannelId, SameNameSameIdDifferentNamesDiffer) {
  uint64_t a = cp_open_channel("test.id.same");
  EXPECT_EQ(cp_open_channel("test.id.same"), a);
  EXPECT_NE(cp_open_channel("test.id.other"), a);
  EXPECT_NE(a, 0u);
}

// ==== the registry, in process ==========================================================

TEST(Registry, HeaderAndOpenedNames) {
  uint64_t id = cp_open_channel("test.registry.a");
  EXPECT_EQ(memcmp(cptrace_registry.magic, CP_REGISTRY_MAGIC, 8), 0);
  EXPECT_EQ(cptrace_registry.version, uint32_t{CP_REGISTRY_VERSION});
  EXPECT_EQ(cptrace_registry.capacity, uint32_t{CP_REGISTRY_CAPACITY});
  auto e = registry_entries_named("test.registry.a");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]->id, id);
  EXPECT_EQ(e[0]->closed, 0u);
}

TEST(Registry, OpenTwiceRegistersOnce) {
  cp_open_channel("test.registry.twice");
  uint32_t count = cptrace_registry.count;
  cp_open_channel("test.registry.twice");
  EXPECT_EQ(cptrace_registry.count, count);
  EXPECT_EQ(registry_entries_named("test.registry.twice").size(), 1u);
}

TEST(Registry, CloseMarksAndReopenClears) {
  uint64_t id = cp_open_channel("test.registry.close");
  cp_close_channel(id);
  auto e = registry_entries_named("test.registry.close");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]->closed, 1u);
  cp_open_channel("test.registry.close");
  EXPECT_EQ(e[0]->closed, 0u);
}

TEST(Registry, LongNameTruncatedIdOfFullName) {
  std::string name(100, 'x');
  uint64_t id = cp_open_channel(name.c_str());
  EXPECT_EQ(id, cp_channel_id(name.c_str()));
  auto e = registry_entries_named(name.substr(0, CP_CHANNEL_NAME_MAX - 1));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]->id, id);
}

TEST(Registry, ConcurrentOpensRegisterEachNameOnce) {
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++)
    ts.emplace_back([] {
      for (int i = 0; i < 50; i++) cp_open_channel(("test.concurrent." + std::to_string(i)).c_str());
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < 50; i++)
    EXPECT_EQ(registry_entries_named("test.concurrent." + std::to_string(i)).size(), 1u) << i;
}

// ==== the registry, read from a process ====================================================

TEST(ProcRegistry, ReadsOwnProcess) {
  uint64_t id = cp_open_channel("test.self");
  auto v = cptrace::read_process_registry(getpid());
  const ChannelEntry* e = find_entry(v, "test.self");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, id);
  EXPECT_FALSE(e->closed);
}

// The registry of a forked child after `in_child` ran there (its result, a
// byte, in `child_said`), read while the child waits; `refused` as the reader
// counted it.
std::vector<ChannelEntry> registry_of_child(char (*in_child)(), char& child_said, uint64_t* refused = nullptr) {
  int go[2], ready[2];
  if (pipe(go) != 0 || pipe(ready) != 0) throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    char c = in_child();
    (void)!write(ready[1], &c, 1);
    (void)!read(go[0], &c, 1);  // until the parent is done reading
    _exit(0);
  }
  child_said = 0;
  std::vector<ChannelEntry> v;
  if (read(ready[0], &child_said, 1) == 1) v = cptrace::read_process_registry(pid, refused);
  (void)!write(go[1], &child_said, 1);
  waitpid(pid, nullptr, 0);
  for (int fd : {go[0], go[1], ready[0], ready[1]}) close(fd);
  return v;
}

TEST(ProcRegistry, ReadsForkedChild) {
  char said = 0;
  auto v = registry_of_child(
      [] {
        cp_open_channel("child.x");
        cp_close_channel(cp_open_channel("child.y"));
        return char(1);
      },
      said);
  ASSERT_EQ(said, 1);
  const ChannelEntry* x = find_entry(v, "child.x");
  const ChannelEntry* y = find_entry(v, "child.y");
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(x->id, cp_channel_id("child.x"));
  EXPECT_FALSE(x->closed);
  EXPECT_TRUE(y->closed);
}

// A program that opens a new name per tuple must not grow the registry without
// bound: it keeps CP_REGISTRY_MAX_NAMES names, counts the rest, and the opens go
// on returning the names' ids. A reader sees both.
constexpr int kBeyondTheCap = 7;
TEST(ProcRegistry, KeepsAtMostMaxNamesAndCountsTheRest) {
  char ok = 0;
  uint64_t refused = 0;
  auto v = registry_of_child(
      [] {
        char ok = 1;  // the child starts with the names this process opened before
        for (int i = 0; ok && i < CP_REGISTRY_MAX_NAMES + kBeyondTheCap; ++i) {
          std::string name = "cap." + std::to_string(i);
          ok = cp_open_channel(name.c_str()) == cp_channel_id(name.c_str());
        }
        return ok;
      },
      ok, &refused);
  EXPECT_EQ(ok, 1) << "an open beyond the cap did not return its name's id";
  ASSERT_EQ(v.size(), size_t{CP_REGISTRY_MAX_NAMES});
  size_t parents = 0;
  for (const ChannelEntry& e : v) parents += e.name.rfind("cap.", 0) != 0;
  // Every name before the cap is kept, in order; exactly the rest are counted.
  EXPECT_EQ(refused, uint64_t(kBeyondTheCap) + parents);
  EXPECT_NE(find_entry(v, "cap." + std::to_string(CP_REGISTRY_MAX_NAMES - parents - 1)), nullptr);
  EXPECT_EQ(find_entry(v, "cap." + std::to_string(CP_REGISTRY_MAX_NAMES - parents)), nullptr);
}

// fork() while another thread opens a channel (the registry's lock held) must
// leave the child a registry it can use: a child that opens or closes a channel
// must never wait on a lock no thread of it will release. The registry is full,
// so each of the other thread's opens of a new name holds the lock the longest.
// Exit status of the process that ran it: the children that hung (killed after 20 s).
int children_that_hung_forked_beside_opens() {
  for (int i = 0; i < CP_REGISTRY_MAX_NAMES; ++i) cp_open_channel(("full." + std::to_string(i)).c_str());
  std::atomic<bool> stop{false};
  std::thread opener([&] {
    for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i)
      cp_open_channel(("more." + std::to_string(i % 4096)).c_str());
  });
  int hung = 0;
  for (int k = 0; k < 300 && hung == 0; ++k) {
    pid_t g = fork();
    if (g == 0) {
      cp_close_channel(cp_open_channel("in.child"));
      _exit(0);
    }
    int st = 0;
    for (int ms = 0; waitpid(g, &st, WNOHANG) == 0; ++ms) {
      if (ms == 20000) {
        kill(g, SIGKILL), waitpid(g, &st, 0), hung++;
        break;
      }
      usleep(1000);
    }
  }
  stop = true;
  opener.join();
  return hung;
}

TEST(ProcRegistry, ForkWhileAnotherThreadOpensLeavesTheChildAbleToOpen) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(children_that_hung_forked_beside_opens());
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st)) << "status " << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << "a child forked beside an open waited forever on the registry's lock";
}

// A process's memory whose registry is full and whose one overflow chunk, of
// the largest capacity read, links to itself: the reader stops once it holds
// more names than a library keeps (CP_REGISTRY_MAX_NAMES), not after reading
// hundreds of MB (a hostile process's hello under `record --all`).
TEST(ProcRegistry, AChunkChainThatLoopsStopsAtTheLibrarysCap) {
  constexpr uint64_t kBase = 0x7f0000001000, kChunk = kBase + sizeof(cp_registry);
  constexpr uint32_t kCapacity = 1u << 16;
  std::vector<uint8_t> mem(sizeof(cp_registry) + sizeof(cp_registry_chunk) + kCapacity * sizeof(cp_registry_entry));
  auto* reg = reinterpret_cast<cp_registry*>(mem.data());
  memcpy(reg->magic, CP_REGISTRY_MAGIC, sizeof reg->magic);
  reg->version = CP_REGISTRY_VERSION, reg->capacity = reg->count = CP_REGISTRY_CAPACITY, reg->overflow = kChunk;
  auto* chunk = reinterpret_cast<cp_registry_chunk*>(mem.data() + sizeof(cp_registry));
  chunk->next = kChunk, chunk->capacity = chunk->count = 4096;  // full: the chain goes on, to itself
  uint64_t reads = 0;
  cptrace::RemoteRead read = [&](uint64_t addr, void* dst, size_t len) {
    reads += len;
    if (addr < kBase || addr - kBase > mem.size() || len > mem.size() - (addr - kBase)) return false;
    memcpy(dst, mem.data() + (addr - kBase), len);
    return true;
  };
  try {
    cptrace::read_registry_at(read, "pid 1: lib", kBase, 0);
    ADD_FAILURE() << "a looping chain was read to the end";
  } catch (const cptrace::ProcRegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("holds more than " + std::to_string(CP_REGISTRY_MAX_NAMES) + " names"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LE(reads, uint64_t(CP_REGISTRY_MAX_NAMES + 4096) * sizeof(cp_registry_entry) + sizeof(cp_registry) * 2)
      << "read far more than a library's registry holds";
  // A header that claims more names than a library keeps is refused as it is read.
  reg->capacity = reg->count = kCapacity, reg->overflow = 0;
  EXPECT_THROW(cptrace::read_registry_at(read, "pid 1: lib", kBase, 0), cptrace::ProcRegistryError);
}

TEST(ProcRegistry, NoSuchProcessThrows) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);  // reaped: the pid names no process now
  try {
    cptrace::read_process_registry(pid);
    FAIL() << "no exception";
  } catch (const cptrace::ProcRegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("no such process"), std::string::npos) << e.what();
  }
}

TEST(ProcRegistry, WorkloadWaitingForSignal) {
  std::string wl = exe_dir() + "/tests/workload";
  if (!file_exists(wl)) GTEST_SKIP() << wl << " not built";
  Child child({wl, "--wait-signal", "--channels", "3", "--threads", "2", "--events", "1000", "--mode", "batch"});
  ASSERT_GT(child.pid(), 0);
  auto ready = child.read_line();
  ASSERT_EQ(ready, "READY " + std::to_string(child.pid()));

  auto v = cptrace::read_process_registry(child.pid());
  for (int c = 0; c < 3; c++) {
    std::string name = "chan" + std::to_string(c);
    const ChannelEntry* e = find_entry(v, name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->id, cp_channel_id(name.c_str()));
  }

  // Every event reaches cp_batch_submit, each thread's tail at its exit.
  UprobeSampler submits(libcptrace_so_path(), "cp_batch_submit", UprobeSampler::kAllProcesses);
  kill(child.pid(), SIGUSR1);
  auto json = child.read_line();
  ASSERT_TRUE(json.has_value()) << "workload status " << child.wait();
  EXPECT_NE(json->find("\"total\":2000"), std::string::npos) << *json;
  int status = child.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  REQUIRE_SAMPLER(submits);
  uint64_t total = 0;
  for (const Hit& h : submits.drain())
    if (h.pid == static_cast<uint32_t>(child.pid())) total += batch_count(h);
  EXPECT_EQ(submits.lost(), 0u);
  EXPECT_EQ(total, 2000u);
}

// A program with libcptrace.a linked in, built here in each link mode the
// reader has to handle. Skipped without a C compiler.
class StaticExe : public ::testing::TestWithParam<const char*> {};

TEST_P(StaticExe, RegistryAndProbeOffsets) {
  std::string ar = exe_dir() + "/libcptrace.a";
  if (!file_exists(ar)) GTEST_SKIP() << ar << " not built";
  const char* tmp = getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/cptrace-static-XXXXXX";
  std::vector<char> dir(tmpl.begin(), tmpl.end());
  dir.push_back('\0');
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::string src = std::string(dir.data()) + "/prog.c", bin = std::string(dir.data()) + "/prog";
  std::ofstream(src) << R"(#include <stdio.h>
#include <stdint.h>
#include <unistd.h>
uint64_t cp_open_channel(const char *);
void cp_close_channel(uint64_t);
int main(void) {
  cp_open_channel("static.a");
  cp_close_channel(cp_open_channel("static.b"));
  printf("READY %d\n", (int)getpid());
  fflush(stdout);
  pause();
  return 0;
})";
  std::string cmd =
      std::string("cc -O2 ") + GetParam() + " " + src + " " + ar + " -lpthread -o " + bin + " 2>/dev/null";
  bool built = system(cmd.c_str()) == 0;
  if (built) {
    Child child({bin});
    ASSERT_EQ(child.read_line(), "READY " + std::to_string(child.pid()));
    auto v = cptrace::read_process_registry(child.pid());
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0], (ChannelEntry{cp_channel_id("static.a"), "static.a", false}));
    EXPECT_EQ(v[1], (ChannelEntry{cp_channel_id("static.b"), "static.b", true}));
    auto off = cptrace::elf_symbol_file_offset(bin, "cp_logTS_site");
    ASSERT_TRUE(off.has_value());
    EXPECT_EQ(file_bytes(bin, *off, kSite.size()), std::optional<Bytes>(kSite));
  }
  unlink(bin.c_str());
  unlink(src.c_str());
  rmdir(dir.data());
  if (!built) GTEST_SKIP() << "could not build with: " << cmd;
}

INSTANTIATE_TEST_SUITE_P(LinkModes, StaticExe,
                         ::testing::Values("-no-pie", "-pie -fPIE", "-static", "-static-pie -fPIE"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::string out;
                           for (char c : s.substr(0, s.find(' ')))
                             if (isalnum(static_cast<unsigned char>(c))) out += c;
                           return out;
                         });

// ==== probe sites are called with the right arguments ========================================

TEST(ProbeCalls, OpenAnnouncesRegistryName) {
  UprobeSampler s(libcptrace_so_path(), "cp_channel_announce", gettid_i());
  REQUIRE_SAMPLER(s);
  uint64_t id = cp_open_channel("test.announce");
  auto hits = s.drain();
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].rdi, id);
  // The name handed over is the registry's copy (resident, NUL-terminated).
  auto e = registry_entries_named("test.announce");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(hits[0].rsi, reinterpret_cast<uint64_t>(e[0]->name));
}

// And the stamp: rax at the probe is the TSC read at the call, inside the
// caller's own rdtsc bracket (on 6.18+ through the optimized path, whose
// trampoline must hand the probe the caller's rax, not its own).
TEST(ProbeCalls, LogTSPassesChannelTupleAndStamp) {
  UprobeSampler s(libcptrace_so_path(), "cp_logTS_site", gettid_i());
  REQUIRE_SAMPLER(s);
  uint64_t ch = cp_open_channel("test.logts");
  uint64_t t[4];
  for (int i = 0; i < 2; ++i) {
    _mm_lfence();
    t[2 * i] = __rdtsc();
    _mm_lfence();
    site_logTS(ch, 42 + i);
    _mm_lfence();
    t[2 * i + 1] = __rdtsc();
  }
  auto hits = s.drain();
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits[0].rdi, ch);
  EXPECT_EQ(hits[0].rsi, 42u);
  EXPECT_EQ(hits[1].rsi, 43u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_GE(hits[i].rax, t[2 * i]) << "call " << i;
    EXPECT_LE(hits[i].rax, t[2 * i + 1]) << "call " << i;
  }
}

TEST(ProbeCalls, BatchFullAndThreadExitFlush) {
  uint64_t ch = cp_open_channel("test.batch.thread");
  std::atomic<pid_t> tid{0};
  std::atomic<bool> go{false};
  std::thread t([&] {
    tid = gettid_i();
    pin_to_cpu(0);  // one CPU: hand-overs only when full (OnCpu0)
    while (!go) std::this_thread::yield();
    for (uint64_t i = 0; i < 600; i++) cp_logTS_batch(ch, i);
  });  // no cp_flush: the tail must go out at thread exit
  while (!tid) std::this_thread::yield();
  UprobeSampler s(libcptrace_so_path(), "cp_batch_submit", tid);
  go = true;
  t.join();
  REQUIRE_SAMPLER(s);
  auto hits = s.drain();
  EXPECT_EQ(batch_sizes(hits), (std::vector<uint64_t>{256, 256, 88}));
  // The buffer is named when made (n 0, its count's address) and with every
  // hand-over, and forgotten (n 0, no address) before it is freed at exit.
  ASSERT_EQ(hits.size(), 5u);
  EXPECT_EQ(uint32_t(hits[0].rsi), 0u);
  EXPECT_NE(hits[0].rdx, 0u);
  for (size_t i = 1; i < 4; i++) EXPECT_EQ(hits[i].rdx, hits[0].rdx) << "hand-over " << i;
  EXPECT_EQ(hits[0].rdx, hits[0].rdi + CP_BATCH_MAX * sizeof(cp_batch_entry)) << "the count after the entries";
  EXPECT_EQ(uint32_t(hits[4].rsi), 0u);
  EXPECT_EQ(hits[4].rdx, 0u);
}

// Each hand-over holds the stamps of one CPU and names it (rdtscp reads the
// TSC and the CPU at once): a thread moved to another CPU hands over what it
// stamped before the move first. Without rdtscp (some VMs hide it) the CPU is
// neither named nor watched.
TEST(ProbeCalls, BatchHandOverNamesTheCpuOfItsStamps) {
  ASSERT_GE(std::thread::hardware_concurrency(), 2u) << "needs two CPUs";
  const bool rdtscp = testutil::cpu_offers_rdtscp();
  uint64_t ch = cp_open_channel("test.batch.cpu");
  cp_flush();
  UprobeSampler s(libcptrace_so_path(), "cp_batch_submit", gettid_i());
  REQUIRE_SAMPLER(s);
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  pin_to_cpu(0);
  for (int i = 0; i < 5; i++) cp_logTS_batch(ch, i);
  pin_to_cpu(1);
  for (int i = 0; i < 7; i++) cp_logTS_batch(ch, 5 + i);
  cp_flush();
  sched_setaffinity(0, sizeof before, &before);
  std::vector<uint64_t> sizes, cpu1;
  for (const Hit& h : s.drain())
    if (batch_count(h)) sizes.push_back(batch_count(h)), cpu1.push_back(batch_stamp_cpu1(h));
  // Without rdtscp the move is not seen: one hand-over of all 12, CPU unnamed.
  const std::vector<uint64_t> split = rdtscp ? std::vector<uint64_t>{5, 7} : std::vector<uint64_t>{12};
  EXPECT_EQ(sizes, split);
  const std::vector<uint64_t> want = rdtscp ? std::vector<uint64_t>{1, 2} : std::vector<uint64_t>{0};
  EXPECT_EQ(cpu1, want) << "1 + the CPU";
}

TEST(ProbeCalls, FlushAndCloseSubmitOnlyWhatIsBuffered) {
  OnCpu0 pinned;
  UprobeSampler s(libcptrace_so_path(), "cp_batch_submit", gettid_i());
  REQUIRE_SAMPLER(s);
  uint64_t ch = cp_open_channel("test.batch.flush");
  cp_flush();  // whatever earlier tests left
  s.drain();
  cp_flush();  // empty: no submit
  for (int i = 0; i < 5; i++) cp_logTS_batch(ch, i);
  cp_flush();
  for (int i = 0; i < 7; i++) cp_logTS_batch(ch, i);
  cp_close_channel(ch);
  EXPECT_EQ(batch_sizes(s.drain()), (std::vector<uint64_t>{5, 7}));
}

TEST(ProbeCalls, ProcessExitFlushesAndForkDoesNotDuplicate) {
  OnCpu0 pinned;  // the child too
  uint64_t ch = cp_open_channel("test.batch.exit");
  cp_flush();
  for (int i = 0; i < 5; i++) cp_logTS_batch(ch, i);  // pending in the parent
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char c;
    (void)!read(go[0], &c, 1);
    for (int i = 0; i < 3; i++) cp_logTS_batch(ch, 100 + i);
    exit(0);  // the library's destructor flushes: 3, not the parent's 5 too
  }
  UprobeSampler in_child(libcptrace_so_path(), "cp_batch_submit", pid);
  UprobeSampler in_parent(libcptrace_so_path(), "cp_batch_submit", gettid_i());
  (void)!write(go[1], "g", 1);
  int status = 0;
  waitpid(pid, &status, 0);
  close(go[0]);
  close(go[1]);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  cp_flush();
  REQUIRE_SAMPLER(in_child);
  REQUIRE_SAMPLER(in_parent);
  EXPECT_EQ(batch_sizes(in_child.drain()), (std::vector<uint64_t>{3}));
  EXPECT_EQ(batch_sizes(in_parent.drain()), (std::vector<uint64_t>{5}));
}

// First byte of a probe site's nop as this process runs it: 0x0f (nop5), 0xcc
// (a uprobe's int3) or 0xe8 (the call into [uprobes-trampoline] of an
// optimized uprobe, Linux 6.18+).
uint8_t nop_byte(const void* site) { return static_cast<const volatile uint8_t*>(site)[CP_SITE_NOP_OFFSET]; }
uint8_t site_byte(const char* symbol) { return nop_byte(dlsym(libcptrace_handle(), symbol)); }

// Calls every probe site of the library (the batch one through a flush and the
// channel ones through open/close); for forked children.
void call_every_site() {
  uint64_t ch = cp_open_channel("test.fork.child");
  site_logTS(ch, 1);
  cp_logTS_batch(ch, 2);
  cp_flush();
  cp_close_channel(ch);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

// Forks a child that reads a probe site's first byte, then makes its calls:
// it must live and see a nop5 (0x0f), whatever the parent's site (parent_byte) is.
void expect_forked_child_sees_nop5(const std::function<uint8_t()>& site_byte_now, const std::function<void()>& calls,
                                   uint8_t parent_byte) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint8_t b = site_byte_now();
    calls();
    _exit(b == 0x0f ? 0 : 10);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << describe_status(status) << " (10: the child's site is not a nop5); parent's site byte 0x" << std::hex
      << int(parent_byte);
}

// Found on Linux 6.18: once a probe site has been hit with a uprobe attached
// (and so optimized: its nop5 rewritten into a call to the process's
// [uprobes-trampoline] page), a fork()ed child inherits the rewritten call but
// not the trampoline mapping. libcptrace's fork handler (lib/fork_safe.c) maps
// the page again in the child: with no uprobe covering the child (this one
// follows the parent's thread only) the child's sites are plain nop5s again.
TEST(ProbeCalls, ForkAfterOptimizedProbeChildSurvives) {
  UprobeSampler s(libcptrace_so_path(), "cp_logTS_site", gettid_i());
  REQUIRE_SAMPLER(s);
  for (int i = 0; i < 3; i++) site_logTS(1, i);  // the first hit optimizes
  expect_forked_child_sees_nop5([] { return site_byte("cp_logTS_site"); }, call_every_site, site_byte("cp_logTS_site"));
}

// A uprobe covering every process: the child's remapped page gets the
// breakpoint back from the kernel, so the child is traced, not just alive.
TEST(ProbeCalls, ForkedChildKeepsASystemWideProbe) {
  UprobeSampler s(libcptrace_so_path(), "cp_logTS_site", UprobeSampler::kAllProcesses);
  REQUIRE_SAMPLER(s);
  for (int i = 0; i < 3; i++) site_logTS(1, i);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    uint8_t b = site_byte("cp_logTS_site");
    site_logTS(7, 77);
    _exit(b == 0xcc ? 0 : 10);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << describe_status(status) << " (10: the child's site is not an int3)";
  int in_child = 0;
  for (const Hit& h : s.drain())
    if (h.pid == static_cast<uint32_t>(pid) && h.rdi == 7 && h.rsi == 77) in_child++;
  EXPECT_EQ(in_child, 1);
}

// The fallback: a library file replaced on disk since it was loaded cannot be
// mapped again (another inode), so the child gets the nop5 written back
// through /proc/self/mem. A private copy of the library, dlopen()ed, then
// replaced by a different file at the same path.
TEST(ProbeCalls, ForkRepairWithReplacedLibraryFileWritesTheNop5) {
  std::string dir = "/tmp/cp_fork_replaced_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::string copy = dir + "/libcptrace.so";
  {
    std::ifstream in(libcptrace_so_path(), std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  void* h = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  // The copy's site itself: its cp_logTS buffers single events (site_logTS).
  const void* logts_site = dlsym(h, "cp_logTS_site");
  auto logts = reinterpret_cast<void (*)(uint64_t, uint64_t)>(logts_site);
  ASSERT_NE(logts_site, nullptr);
  {
    UprobeSampler s(copy, "cp_logTS_site", gettid_i());
    if (!s.ok()) {
      dlclose(h);
      GTEST_SKIP() << "perf uprobes unavailable: " << s.error();
    }
    for (int i = 0; i < 3; i++) logts(1, i);
    uint8_t parent_byte = nop_byte(logts_site);
    // Another file at the same path (the loaded one lives on, unlinked).
    ASSERT_EQ(unlink(copy.c_str()), 0);
    { std::ofstream(copy) << "not the library"; }
    expect_forked_child_sees_nop5([&] { return nop_byte(logts_site); }, [&] { logts(2, 0); }, parent_byte);
  }
  dlclose(h);
  unlink(copy.c_str());
  rmdir(dir.c_str());
}

// The race the repair must survive: uprobes attached and detached at any
// moment relative to fork(), in the parent, while children call every site.
// Deterministic in what it asserts (no child dies), whatever the timing.
TEST(ProbeCalls, ForkRacingAttachAndDetachNeverKillsAChild) {
  {
    UprobeSampler probe(libcptrace_so_path(), "cp_logTS_site", UprobeSampler::kAllProcesses);
    REQUIRE_SAMPLER(probe);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> cycles{0};
  std::thread flipper([&] {
    unsigned seed = 1;
    while (!stop) {
      UprobeSampler a(libcptrace_so_path(), "cp_logTS_site", UprobeSampler::kAllProcesses);
      UprobeSampler b(libcptrace_so_path(), "cp_channel_announce", UprobeSampler::kAllProcesses);
      UprobeSampler c(libcptrace_so_path(), "cp_batch_submit", UprobeSampler::kAllProcesses);
      usleep(rand_r(&seed) % 2000);
      cycles++;
    }
  });
  constexpr int kChildren = 200;
  int died = 0;
  std::string first;
  for (int i = 0; i < kChildren; i++) {
    call_every_site();  // optimizes whatever is attached right now
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int k = 0; k < 3; k++) call_every_site();
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && died++ == 0) first = describe_status(status);
  }
  stop = true;
  flipper.join();
  EXPECT_EQ(died, 0) << "first: " << first;
  EXPECT_GT(cycles.load(), 0);
}

// ---- cp_logTS: its own site or the thread's buffer (lib/single_route.c) -------

// Where one process's events reached the library's sites.
struct SiteHits {
  uint64_t site = 0;  // cp_logTS_site hits
  uint64_t site_on_sig = 0;  // of which on the workload's "sig" channel
  uint64_t submitted = 0;  // entries handed over by cp_batch_submit
  uint64_t handed_for = 0;  // entries handed over by cp_batch_submit_for
  std::set<uint32_t> owners, flusher_threads;  // cp_batch_submit_for: its tid argument, the caller
};

class SiteSamplers {
 public:
  SiteSamplers()
      : site_(libcptrace_so_path(), "cp_logTS_site", UprobeSampler::kAllProcesses),
        submit_(libcptrace_so_path(), "cp_batch_submit", UprobeSampler::kAllProcesses),
        submit_for_(libcptrace_so_path(), "cp_batch_submit_for", UprobeSampler::kAllProcesses) {}
  std::string error() const {
    for (const UprobeSampler* s : {&site_, &submit_, &submit_for_})
      if (!s->ok()) return s->error();
    return "";
  }
  uint64_t lost() const { return site_.lost() + submit_.lost() + submit_for_.lost(); }
  // Adds what `pid` did since the last call.
  void drain(pid_t pid, SiteHits& h) {
    auto mine = [&](const Hit& x) { return x.pid == static_cast<uint32_t>(pid); };
    for (const Hit& x : site_.drain())
      if (mine(x)) {
        h.site++;
        h.site_on_sig += x.rdi == cp_channel_id("sig");
      }
    for (const Hit& x : submit_.drain())
      if (mine(x)) h.submitted += batch_count(x);
    for (const Hit& x : submit_for_.drain())
      if (mine(x)) {
        h.handed_for += batch_count(x);
        h.owners.insert(static_cast<uint32_t>(x.rcx));
        h.flusher_threads.insert(x.tid);
      }
  }

 private:
  UprobeSampler site_, submit_, submit_for_;
};

// The workload with CPTRACE_SINGLE=mode (nullptr: unset) in its environment.
std::unique_ptr<Child> spawn_workload(const char* mode, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {exe_dir() + "/tests/workload"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (mode)
    setenv("CPTRACE_SINGLE", mode, 1);
  else
    unsetenv("CPTRACE_SINGLE");
  auto c = std::make_unique<Child>(argv);
  unsetenv("CPTRACE_SINGLE");
  return c;
}

// 2 threads x 1 000 single events with CPTRACE_SINGLE=mode: where they went.
SiteHits singles_with_mode(const char* mode) {
  SiteSamplers s;
  SiteHits h;
  if (!s.error().empty()) return h;
  auto c = spawn_workload(mode, {"--threads", "2", "--events", "1000", "--channels", "1", "--mode", "single"});
  EXPECT_TRUE(c->read_line().has_value()) << "workload report";
  EXPECT_EQ(c->wait(), 0);
  s.drain(c->pid(), h);
  EXPECT_EQ(s.lost(), 0u);
  return h;
}

// site: each event hits the site; buffer: none does, all go through the thread
// buffers; unset, auto or an unknown value: the buffer, on every kernel (it is
// the cheaper path even where the kernel optimizes the site).
TEST(SingleRoute, ModeDecidesWhereSingleEventsGo) {
  {
    SiteSamplers probe;
    if (!probe.error().empty()) GTEST_SKIP() << "perf uprobes unavailable: " << probe.error();
  }
  SiteHits site = singles_with_mode("site");
  EXPECT_EQ(site.site, 2000u);
  EXPECT_EQ(site.submitted + site.handed_for, 0u);
  SiteHits buffer = singles_with_mode("buffer");
  EXPECT_EQ(buffer.site, 0u);
  EXPECT_EQ(buffer.submitted + buffer.handed_for, 2000u);
  for (const char* mode : {static_cast<const char*>(nullptr), "auto", "fast"}) {
    SiteHits h = singles_with_mode(mode);
    EXPECT_EQ(h.site, 0u) << (mode ? mode : "(unset)");
    EXPECT_EQ(h.submitted + h.handed_for, 2000u) << (mode ? mode : "(unset)");
  }
}

// Threads that log a few buffered events and then idle (alive): their events
// are handed over by the flusher thread, named with each owner's tid, while
// they idle; none again when they end.
TEST(SingleRoute, FlusherHandsOverAnIdleThreadsEvents) {
  SiteSamplers s;
  if (!s.error().empty()) GTEST_SKIP() << "perf uprobes unavailable: " << s.error();
  OnCpu0 pinned;  // inherited: the workload's threads never move, so only the flusher hands over
  auto c =
      spawn_workload("buffer", {"--threads", "2", "--events", "5", "--channels", "1", "--mode", "single", "--linger"});
  ASSERT_EQ(c->read_line(), "LOGGED " + std::to_string(c->pid()));
  SiteHits h;
  for (int i = 0; i < 300 && h.handed_for < 10; i++) {  // the threads idle: only the flusher can
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.drain(c->pid(), h);
  }
  EXPECT_EQ(h.handed_for, 10u) << "while the threads idled";
  EXPECT_EQ(h.site + h.submitted, 0u);
  kill(c->pid(), SIGUSR1);
  auto report = c->read_line();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(c->wait(), 0);
  s.drain(c->pid(), h);
  EXPECT_EQ(h.handed_for + h.submitted + h.site, 10u) << "each event handed over once";
  std::set<uint32_t> workers;
  auto j = nlohmann::json::parse(*report);
  for (const auto& t : j["thread_list"]) workers.insert(t["tid"].get<uint32_t>());
  EXPECT_EQ(h.owners, workers) << "named with the threads that logged them";
  ASSERT_EQ(h.flusher_threads.size(), 1u);
  EXPECT_EQ(workers.count(*h.flusher_threads.begin()), 0u) << "handed over by another thread";
}

// A signal handler logging while its thread is inside an append of its own:
// that call takes the site, every other one the buffer. (That every event
// arrives exactly once is Record.BufferedSinglesFromASignalHandlerExactSet's:
// perf may throttle a sampler, never the recorder's programs.)
TEST(SingleRoute, SignalHandlerInsideAnAppendTakesTheSite) {
  SiteSamplers s;
  if (!s.error().empty()) GTEST_SKIP() << "perf uprobes unavailable: " << s.error();
  auto c = spawn_workload(
      "buffer", {"--threads", "1", "--events", "3000000", "--channels", "1", "--mode", "single", "--signal-us", "50"});
  auto report = c->read_line(120000);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(c->wait(), 0);
  SiteHits h;
  s.drain(c->pid(), h);
  EXPECT_EQ(s.lost(), 0u);
  auto j = nlohmann::json::parse(*report);
  uint64_t sig = j["signal_events"].get<uint64_t>();
  EXPECT_GT(sig, 100u) << "the timer interrupted the thread";
  EXPECT_EQ(h.site, h.site_on_sig) << "only the handler's calls take the site";
  EXPECT_LE(h.site_on_sig, sig);
  EXPECT_GT(h.site_on_sig, 0u) << "no handler call met an append (of " << sig << ")";
}
