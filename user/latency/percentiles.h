// The order statistics every latency summary names, in one type: `latency`'s
// table and JSON (min, p50, p90, p99, max of values, bounds and widths), the
// report's and `top`'s (p25 .. p99 too). A summary asks for fields and reads
// fields: no list of ranks whose positions each reader must know.
//
// Percentile p of n values is the k-th smallest, k = max(1, ceil(p * n))
// (nearest_rank_index, rank_select.h): min is the first, max the last.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "tables/rank_select.h"

namespace cptrace {

template <typename T>
struct Percentiles {
  T min{}, p25{}, p50{}, p75{}, p90{}, p99{}, max{};

  // The fraction each field stands for.
  using Field = T Percentiles::*;
  static double fraction(Field f) {
    if (f == &Percentiles::min) return 0;
    if (f == &Percentiles::p25) return 0.25;
    if (f == &Percentiles::p50) return 0.5;
    if (f == &Percentiles::p75) return 0.75;
    if (f == &Percentiles::p90) return 0.9;
    if (f == &Percentiles::p99) return 0.99;
    if (f == &Percentiles::max) return 1.0;
    throw std::logic_error("not a percentile field");
  }
  // The 0-based ranks of `fields` among n values (n > 0), in their order.
  static std::vector<uint64_t> ranks(uint64_t n, const std::vector<Field>& fields) {
    std::vector<uint64_t> ks;
    for (Field f : fields) ks.push_back(nearest_rank_index(n, fraction(f)));
    return ks;
  }
  // fn(got[at + i]) into fields[i] of out: what was selected at ranks(n,
  // fields), by name (fn: a key back to its value, ticks to seconds, ...).
  template <typename U, typename Fn>
  static void fill(Percentiles& out, const std::vector<Field>& fields, const std::vector<U>& got, Fn&& fn,
                   size_t at = 0) {
    for (Field f : fields) out.*f = fn(got[at++]);
  }
};

// Every field, in order.
template <typename T>
std::vector<typename Percentiles<T>::Field> all_percentiles() {
  using P = Percentiles<T>;
  return {&P::min, &P::p25, &P::p50, &P::p75, &P::p90, &P::p99, &P::max};
}

}  // namespace cptrace
