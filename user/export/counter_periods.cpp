#include "export/counter_periods.h"

#include <exception>

namespace cptrace {

CounterPeriods::CounterPeriods(const nlohmann::json& history) {
  if (!history.is_array()) return;
  for (const auto& c : history) {
    try {
      Install i{c.at("channel").get<uint64_t>(),
                c.at("before").at("tsc").get<uint64_t>(),
                c.at("handler").get<std::string>() == "counter",
                {}};
      if (i.counter) {
        i.rule.period_ns = c.at("params").at(0).get<uint64_t>();
        i.rule.period_ticks = c.value("period_ticks", uint64_t(0));
      }
      installs_.push_back(i);
    } catch (const std::exception&) {
      // A damaged entry: its points get period 0 rather than a guessed one.
    }
  }
}

CounterRule CounterPeriods::at(uint64_t channel, uint64_t start) const {
  // A point's start is aligned down to a multiple of PERIOD, so it may precede
  // the install that began counting it by up to one period.
  auto latest = [&](uint64_t ch) -> const Install* {
    const Install* best = nullptr;
    for (const Install& i : installs_)
      if (i.channel == ch && i.tsc <= start + (i.counter ? i.rule.period_ticks : 0) && (!best || i.tsc >= best->tsc))
        best = &i;
    return best;
  };
  const Install* own = latest(channel);
  const Install* use = own && own->counter ? own : latest(0);
  return use && use->counter ? use->rule : CounterRule{};
}

}  // namespace cptrace
