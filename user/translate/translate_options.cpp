// `cptrace translate`'s options: see translate_options.h.
#include "translate/translate_options.h"

#include <stdexcept>

#include <fmt/format.h>
#include <zstd.h>

namespace cptrace {
namespace {

// The names of translate's choices, one table per option: name_of and the
// parse functions below read the same table.
template <class E>
struct Choice {
  E value;
  const char* name;
};
constexpr Choice<Method> kMethods[] = {{Method::Ratio, "ratio"}, {Method::Hull, "hull"}, {Method::Best, "best"}};
constexpr Choice<ClockModel> kClockModels[] = {{ClockModel::Linear, "linear"}, {ClockModel::Piecewise, "piecewise"}};
constexpr Choice<Inputs> kInputs[] = {{Inputs::Both, "both"}, {Inputs::Rounds, "rounds"}, {Inputs::Traffic, "traffic"}};

template <class E, size_t N>
std::string choice_name(const Choice<E> (&table)[N], E v) {
  for (const Choice<E>& c : table)
    if (c.value == v) return c.name;
  throw std::logic_error("translate option value without a name");
}

// "--method fast: must be ratio, hull or best".
template <class E, size_t N>
E parse_choice(const Choice<E> (&table)[N], std::string_view s, std::string_view what) {
  std::string names;
  for (size_t i = 0; i < N; ++i) {
    if (s == table[i].name) return table[i].value;
    names += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
  }
  throw std::invalid_argument(fmt::format("{} {}: must be {}", what, s, names));
}

}  // namespace

std::string name_of(Method m) { return choice_name(kMethods, m); }
std::string name_of(ClockModel m) { return choice_name(kClockModels, m); }
std::string name_of(Inputs i) { return choice_name(kInputs, i); }
Method parse_method(std::string_view s, std::string_view what) { return parse_choice(kMethods, s, what); }
ClockModel parse_clock_model(std::string_view s, std::string_view what) { return parse_choice(kClockModels, s, what); }
Inputs parse_inputs(std::string_view s, std::string_view what) { return parse_choice(kInputs, s, what); }

void check_options(const TranslateOptions& opt) {
  if (!(opt.max_drift_ppm > 0) || opt.max_drift_ppm > 100000)
    throw std::runtime_error(fmt::format("--max-drift-ppm {}: must be in (0, 100000]", opt.max_drift_ppm));
  if (opt.compression_level < ZSTD_minCLevel() || opt.compression_level > ZSTD_maxCLevel())
    throw std::runtime_error(fmt::format("--compression-level {}: must be a zstd level in [{}, {}]",
                                         opt.compression_level, ZSTD_minCLevel(), ZSTD_maxCLevel()));
  if (opt.dirs.empty()) throw std::runtime_error("no trace directories given");
}

}  // namespace cptrace
