// See proc_registry.h.
#include "probe/proc_registry.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "cptrace_registry.h"
#include "probe/maps_line.h"

namespace cptrace {
namespace {

// Larger capacities than ours are accepted (the layout carries its capacity),
// but not absurd ones from a corrupt or hostile header; the same bounds the
// overflow chain (chunk size), which a corrupt or changing process could make
// endless. In all, no more names than a library of this registry version keeps
// (CP_REGISTRY_MAX_NAMES, 1.4 MB): a process that claims more is corrupt or
// hostile, and must not make the root recorder read and hold hundreds of MB
// (each hello of `record --all` reads it again).
constexpr uint32_t kMaxRegistryCapacity = 1u << 16;
constexpr uint64_t kMaxRegistryEntries = CP_REGISTRY_MAX_NAMES;

std::string pid_prefix(pid_t pid) { return "pid " + std::to_string(pid) + ": "; }

// ---- ELF files --------------------------------------------------------------

void init_libelf() {
  static const bool ok = elf_version(EV_CURRENT) != EV_NONE;
  if (!ok) throw ProcRegistryError("libelf: " + std::string(elf_errmsg(-1)));
}

// An open ELF file, closed on scope exit.
class ElfFile {
 public:
  // valid() is false when the file opens but is not ELF; throws when it
  // cannot be opened at all.
  explicit ElfFile(const std::string& path) {
    init_libelf();
    // O_NONBLOCK: a FIFO must not block the open (libelf then rejects it).
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw ProcRegistryError("cannot open " + path + ": " + std::strerror(errno));
    elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
    if (elf_ && elf_kind(elf_) != ELF_K_ELF) {
      elf_end(elf_);
      elf_ = nullptr;
    }
  }
  ~ElfFile() {
    if (elf_) elf_end(elf_);
    if (fd_ >= 0) ::close(fd_);
  }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  bool valid() const { return elf_ != nullptr; }
  Elf* get() const { return elf_; }

 private:
  int fd_ = -1;
  Elf* elf_ = nullptr;
};

std::optional<GElf_Sym> find_defined_symbol_in(Elf* elf, Elf_Scn* scn, const GElf_Shdr& sh, const std::string& name) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || sh.sh_entsize == 0) return std::nullopt;
  size_t n = sh.sh_size / sh.sh_entsize;
  for (size_t i = 1; i < n; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    const char* s = elf_strptr(elf, sh.sh_link, sym.st_name);
    if (s && name == s) return sym;
  }
  return std::nullopt;
}

// The definition of `name` from .symtab or, for stripped files, .dynsym.
std::optional<GElf_Sym> find_defined_symbol(Elf* elf, const std::string& name) {
  for (Elf64_Word type : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != type) continue;
      if (auto sym = find_defined_symbol_in(elf, scn, sh, name)) return sym;
    }
  }
  return std::nullopt;
}

std::vector<GElf_Phdr> load_segments(Elf* elf) {
  std::vector<GElf_Phdr> loads;
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return loads;
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) loads.push_back(ph);
  }
  return loads;
}

// ---- /proc/PID/maps -------------------------------------------------------------

using Mapping = MapsLine;

// The whole of a /proc file (whose size stat() does not tell), or errno.
std::optional<std::string> slurp(const std::string& file, int& err) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return std::nullopt;
  }
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  err = n < 0 ? errno : 0;
  ::close(fd);
  if (n < 0) return std::nullopt;
  return text;
}

std::vector<Mapping> read_maps(pid_t pid) {
  std::string file = "/proc/" + std::to_string(pid) + "/maps";
  int err = 0;
  auto text = slurp(file, err);
  if (!text) {
    if (err == ENOENT || err == ESRCH) throw ProcRegistryError(pid_prefix(pid) + "no such process");
    throw ProcRegistryError(pid_prefix(pid) + "cannot read " + file + ": " + std::strerror(err) +
                            (err == EACCES ? " (need root or CAP_SYS_PTRACE)" : ""));
  }
  std::vector<Mapping> maps;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t eol = text->find('\n', pos);
    if (eol == std::string::npos) eol = text->size();
    if (auto m = parse_maps_line(text->substr(pos, eol - pos))) maps.push_back(std::move(*m));
    pos = eol + 1;
  }
  // A process that exits between open and read leaves an empty file.
  if (maps.empty() && ::kill(pid, 0) != 0 && errno == ESRCH)
    throw ProcRegistryError(pid_prefix(pid) + "no such process");
  return maps;
}

// One mapped file object: where its lowest mapping starts and at which file
// offset. That is enough to place every symbol, since the loaders map the
// first PT_LOAD segment first and the others at fixed distances from it.
struct MappedObject {
  Mapping first;
};

// Objects in address order. A new object starts at a mapping with file
// offset 0, or at the first mapping of a file not seen before; later mappings
// of the same file (further segments, RELRO splits) belong to it.
std::vector<MappedObject> mapped_objects(const std::vector<Mapping>& maps) {
  std::vector<MappedObject> objs;
  std::set<std::pair<dev_t, uint64_t>> seen;
  for (const Mapping& m : maps) {
    if (m.inode == 0 || m.path.empty() || m.path[0] != '/') continue;
    bool is_new = seen.insert({m.dev(), m.inode}).second;
    if (is_new || m.offset == 0) objs.push_back({m});
  }
  return objs;
}

// A path that opens the mapped file itself, even if it was deleted or lives
// in another mount namespace; the plain path as a last resort.
std::vector<std::string> open_candidates(pid_t pid, const Mapping& m) {
  std::string proc = "/proc/" + std::to_string(pid);
  return {proc + "/map_files/" + m.map_files_name(), proc + "/root" + m.path, m.path};
}

// Runtime address of `sym` in the object whose lowest mapping is `first`;
// nullopt when that mapping is not the object's first PT_LOAD segment.
std::optional<uint64_t> runtime_address(Elf* elf, const GElf_Sym& sym, const Mapping& first) {
  std::vector<GElf_Phdr> loads = load_segments(elf);
  if (loads.empty()) return std::nullopt;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const GElf_Phdr& lo = loads.front();
  if (first.offset != (lo.p_offset & ~(page - 1))) return std::nullopt;
  uint64_t bias = first.start - (lo.p_vaddr & ~(page - 1));
  return sym.st_value + bias;
}

// ---- reading the target's memory ------------------------------------------------

// false if the range is not mapped (the object went away); throws if the
// process is gone or may not be read.
bool read_remote(pid_t pid, uint64_t addr, void* dst, size_t len) {
  iovec local{dst, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(len)) return true;
  if (got < 0 && errno == ESRCH) throw ProcRegistryError(pid_prefix(pid) + "no such process");
  if (got < 0 && errno == EPERM)
    throw ProcRegistryError(pid_prefix(pid) + "permission denied reading its memory (need root or CAP_SYS_PTRACE)");
  return false;
}

bool header_is_zero(const cp_registry& h) {
  static const char zero[8] = {};
  return std::memcmp(h.magic, zero, sizeof(zero)) == 0;
}

void check_header(const std::string& where, const cp_registry& h, uint64_t sym_size) {
  auto fail = [&](const std::string& why) { throw ProcRegistryError(where + ": " CP_REGISTRY_SYMBOL " " + why); };
  if (std::memcmp(h.magic, CP_REGISTRY_MAGIC, sizeof(h.magic)) != 0) fail("has an unknown magic");
  if (h.version != CP_REGISTRY_VERSION)
    fail("has version " + std::to_string(h.version) + ", this reader knows " + std::to_string(CP_REGISTRY_VERSION));
  if (h.capacity == 0 || h.capacity > kMaxRegistryCapacity || h.count > h.capacity)
    fail("is corrupt (capacity " + std::to_string(h.capacity) + ", count " + std::to_string(h.count) + ")");
  if (h.count > kMaxRegistryEntries)
    fail("holds more than " + std::to_string(kMaxRegistryEntries) + " names (corrupt)");
  uint64_t need = offsetof(cp_registry, entries) + uint64_t{h.count} * sizeof(cp_registry_entry);
  if (sym_size != 0 && need > sym_size) fail("count exceeds the symbol's size");
}

ChannelEntry to_channel_entry(const cp_registry_entry& e) {
  // The library writes at most CP_CHANNEL_NAME_MAX - 1 bytes and a NUL; a field
  // without one (corrupt, or written by someone else) is cut there too.
  return {e.id, std::string(e.name, strnlen(e.name, sizeof(e.name) - 1)), e.closed != 0};
}

// The entries of the overflow chain starting at `addr`, appended to `out`; each
// chunk's header first, so only entries published before that read are taken.
void read_overflow_chain(const RemoteRead& read, const std::string& where, uint64_t addr,
                         std::vector<ChannelEntry>& out) {
  while (addr != 0) {
    cp_registry_chunk c;
    if (!read(addr, &c, sizeof c)) return;  // unmapped: the object went away
    if (c.capacity == 0 || c.capacity > kMaxRegistryCapacity || c.count > c.capacity)
      throw ProcRegistryError(where + ": " CP_REGISTRY_SYMBOL " has a corrupt overflow chunk (capacity " +
                              std::to_string(c.capacity) + ", count " + std::to_string(c.count) + ")");
    if (out.size() + c.count > kMaxRegistryEntries)
      throw ProcRegistryError(where + ": " CP_REGISTRY_SYMBOL " holds more than " +
                              std::to_string(kMaxRegistryEntries) + " names (corrupt or a loop)");
    std::vector<cp_registry_entry> raw(c.count);
    size_t len = raw.size() * sizeof(cp_registry_entry);
    if (len && !read(addr + offsetof(cp_registry_chunk, entries), raw.data(), len)) return;
    for (const auto& e : raw) out.push_back(to_channel_entry(e));
    if (c.count < c.capacity) return;  // not full: nothing was linked after it when we read count
    addr = c.next;
  }
}

// The registry of one mapped object, empty if it has none.
std::vector<ChannelEntry> read_object_registry(pid_t pid, const MappedObject& obj, uint64_t* refused) {
  for (const std::string& path : open_candidates(pid, obj.first)) {
    std::optional<ElfFile> f;
    try {
      f.emplace(path);
    } catch (const ProcRegistryError&) {
      continue;  // try the next way to open the same file
    }
    if (!f->valid()) return {};
    auto sym = find_defined_symbol(f->get(), CP_REGISTRY_SYMBOL);
    if (!sym) return {};
    auto addr = runtime_address(f->get(), *sym, obj.first);
    if (!addr) return {};
    auto read = [pid](uint64_t at, void* dst, size_t len) { return read_remote(pid, at, dst, len); };
    return read_registry_at(read, pid_prefix(pid) + obj.first.path, *addr, sym->st_size, refused);
  }
  return {};
}

}  // namespace

// The entries of the registry at `addr`: header first, so that only entries
// published before that read (count) are taken; then its overflow chain.
std::vector<ChannelEntry> read_registry_at(const RemoteRead& read, const std::string& where, uint64_t addr,
                                           uint64_t sym_size, uint64_t* refused) {
  cp_registry hdr;
  const size_t hdr_len = offsetof(cp_registry, entries);
  if (!read(addr, &hdr, hdr_len) || header_is_zero(hdr)) return {};
  check_header(where, hdr, sym_size);
  if (refused) *refused += hdr.refused;
  std::vector<cp_registry_entry> raw(hdr.count);
  size_t len = raw.size() * sizeof(cp_registry_entry);
  if (len && !read(addr + hdr_len, raw.data(), len)) return {};
  std::vector<ChannelEntry> out;
  for (const auto& e : raw) out.push_back(to_channel_entry(e));
  if (hdr.count == hdr.capacity) read_overflow_chain(read, where, hdr.overflow, out);
  return out;
}

std::vector<ChannelEntry> read_process_registry(pid_t pid, uint64_t* refused) {
  if (pid <= 0) throw ProcRegistryError(pid_prefix(pid) + "not a process id");
  std::vector<ChannelEntry> out;
  std::set<uint64_t> ids;
  for (const MappedObject& obj : mapped_objects(read_maps(pid)))
    for (ChannelEntry& e : read_object_registry(pid, obj, refused))
      if (ids.insert(e.id).second) out.push_back(std::move(e));
  return out;
}

std::optional<uint64_t> elf_symbol_file_offset(const std::string& elf_path, const std::string& symbol) {
  ElfFile f(elf_path);
  if (!f.valid()) throw ProcRegistryError(elf_path + ": not an ELF file");
  auto sym = find_defined_symbol(f.get(), symbol);
  if (!sym) return std::nullopt;
  for (const GElf_Phdr& ph : load_segments(f.get()))
    if (sym->st_value >= ph.p_vaddr && sym->st_value < ph.p_vaddr + ph.p_filesz)
      return sym->st_value - ph.p_vaddr + ph.p_offset;
  return std::nullopt;
}

}  // namespace cptrace
