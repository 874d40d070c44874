// libFuzzer target: any bytes as the meta.json of a trace or of a translated
// run, which `info`, `latency`, `report`, `translate` and `top` read from a
// directory the user names (a copy from another machine, a damaged one). Each
// reader gives its value or a std::exception, nothing else: no crash, no
// undefined behaviour, no unbounded recursion; and a translated run's
// relations, once read, answer for any instant.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>

#include <nlohmann/json.hpp>

#include "latency/duration_bounds.h"
#include "trace/trace_meta.h"
#include "trace/tsc_skew_history.h"

using namespace cptrace;

namespace {

void guarded(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception&) {
  }
}

// A relation read from the file, asked what any reader asks of it.
void use(const RelationPtr& r) {
  if (!r) return;
  for (int64_t x : {int64_t(0), int64_t(1) << 40, -(int64_t(1) << 40)}) {
    guarded([&] { r->at(x); });
    guarded([&] { r->scale({-1000, 0, 1000}, x); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json meta = nlohmann::json::parse(data, data + size, nullptr, false);
  if (meta.is_discarded()) return 0;
  guarded([&] { TscSkewHistory::from_meta(meta); });
  guarded([&] { TraceMeta::from_json(meta).start_rt_minus_mono_ns(); });
  if (!meta.is_object()) return 0;
  if (meta.contains("translated")) {
    guarded([&] {
      DurationBounds d = DurationBounds::from_translated(meta["translated"]);
      for (const RelationPtr& r : d.to_ref) use(r);
      for (const auto& [pair, r] : d.direct) use(r);
    });
  }
  return 0;
}
