// libFuzzer target: the channel registry as the recorder reads it out of a
// traced process's memory (probe/proc_registry.h; `record -p` and the hello of
// `record --all`). The process chooses every byte. The input is that memory:
// mapped at kBase, the registry at its start, chunks wherever its addresses
// point (reads outside the input find nothing mapped). The reader gives
// channels or a ProcRegistryError naming the object, nothing else, and every
// name fits the registry's field; a chain of chunks that loops on itself ends
// at the reader's cap on entries (ASan's allocation limit would catch more).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "cptrace_records.h"
#include "probe/proc_registry.h"

using namespace cptrace;

namespace {

constexpr uint64_t kBase = 0x7f0000001000;
const std::string kWhere = "pid 1: /fuzz/libcptrace.so";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RemoteRead read = [&](uint64_t addr, void* dst, size_t len) {
    if (addr < kBase || addr - kBase > size || len > size - (addr - kBase)) return false;
    std::memcpy(dst, data + (addr - kBase), len);
    return true;
  };
  for (uint64_t sym_size : {uint64_t(0), uint64_t(size)}) {
    try {
      for (const ChannelEntry& e : read_registry_at(read, kWhere, kBase, sym_size))
        if (e.name.size() >= CP_CHANNEL_NAME_MAX) __builtin_trap();
    } catch (const ProcRegistryError& e) {
      if (std::string(e.what()).rfind(kWhere + ": ", 0) != 0) __builtin_trap();  // names the object
    }
  }
  return 0;
}
