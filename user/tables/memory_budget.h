// The memory an analysis command may use (`--memory SIZE`, default 1 GiB) and
// where it spills what does not fit (`--temp-dir`, default $TMPDIR or /tmp).
//
// The budget covers the data that grows with the run (per-tuple records, hash
// tables, rows, percentile columns); each stage takes a fixed share of it, so
// peak memory does not depend on the run's length. Fixed costs (the reader's
// meta data, one decoded frame, the code) come on top: a few tens of MB.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cptrace {

struct MemoryBudget {
  static constexpr uint64_t kDefaultBytes = 1ull << 30;
  static constexpr uint64_t kMinBytes = 16ull << 20;  // below this the merge buffers themselves do not fit
  uint64_t bytes = kDefaultBytes;
  std::string temp_dir;  // empty: $TMPDIR, else /tmp
  // `--threads`: how many threads the analysis may use (0: every CPU). Not
  // memory, but it travels with the budget to every stage that splits work.
  unsigned threads = 0;

  MemoryBudget share(double fraction) const;
  std::string spill_dir() const;
  unsigned thread_count() const;  // threads, or the CPUs this process may run on
};

// Asks the kernel for huge pages under [p, p + bytes) (the whole 2 MiB pages
// inside it): a large buffer filled once then costs a page fault per 2 MiB, not
// per 4 KiB. Only advice: nothing changes where transparent huge pages are off.
void advise_huge_pages(const void* p, size_t bytes);

// "1G", "512M", "300k", "2GiB", "1073741824" -> bytes (powers of 1024). Throws
// std::runtime_error naming the option and the value on anything else, and on
// a size below MemoryBudget::kMinBytes.
uint64_t parse_memory_size(const std::string& option, const std::string& value);

}  // namespace cptrace
