// Memory budget of the analysis commands (memory_budget.h).
#include "tables/memory_budget.h"

#include <sched.h>
#include <sys/mman.h>

#include <cctype>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

namespace cptrace {

MemoryBudget MemoryBudget::share(double fraction) const {
  MemoryBudget b = *this;
  b.bytes = uint64_t(double(bytes) * fraction);
  return b;
}

std::string MemoryBudget::spill_dir() const {
  if (!temp_dir.empty()) return temp_dir;
  const char* t = getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

void advise_huge_pages(const void* p, size_t bytes) {
  constexpr uintptr_t kHuge = 2 << 20;
  uintptr_t b = (uintptr_t(p) + kHuge - 1) & ~(kHuge - 1), e = (uintptr_t(p) + bytes) & ~(kHuge - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
}

unsigned MemoryBudget::thread_count() const {
  if (threads) return threads;
  // The affinity mask, not the machine's CPU count: under taskset or a cgroup
  // cpuset more threads than CPUs would only take turns.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return unsigned(CPU_COUNT(&set));
  return 1;
}

uint64_t parse_memory_size(const std::string& option, const std::string& value) {
  auto bad = [&](const std::string& why) {
    return std::runtime_error(fmt::format("{} {}: {} (e.g. 1G, 512M, 64M)", option, value, why));
  };
  size_t i = 0;
  while (i < value.size() && std::isdigit(static_cast<unsigned char>(value[i]))) ++i;
  if (i == 0 || i > 18) throw bad("not a size");
  uint64_t n = std::stoull(value.substr(0, i));
  std::string unit = value.substr(i);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit == "" || unit == "B")
    shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    shift = 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB")
    shift = 40;
  if (shift < 0) throw bad("unknown unit \"" + value.substr(i) + "\"");
  if (shift && n > (~0ull >> shift)) throw bad("too large");
  n <<= shift;
  if (n < MemoryBudget::kMinBytes) throw bad(fmt::format("below the minimum of {} MiB", MemoryBudget::kMinBytes >> 20));
  return n;
}

}  // namespace cptrace
