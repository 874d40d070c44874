// Test-only simulated clock: see clock_transform.h for the formula and why.
#include "clock/clock_transform.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/core.h>

namespace cptrace {
namespace {

using i128 = __int128;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

i128 floor_div(i128 a, i128 b) {  // b > 0
  i128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

uint64_t clamp_u64(i128 v) { return v < 0 ? 0 : v > i128(kMax) ? kMax : uint64_t(v); }

}  // namespace

ClockTransform ClockTransform::from_params(int64_t offset_ticks, int64_t skew_ppb, uint64_t anchor) {
  if (std::llabs(skew_ppb) > int64_t(kMaxSkewPpm * 1000))
    throw std::invalid_argument(fmt::format("simulated clock: skew {} ppb beyond +-{} ppm", skew_ppb, kMaxSkewPpm));
  ClockTransform t;
  t.enabled = true;
  t.offset_ticks = offset_ticks;
  t.skew_ppb = skew_ppb;
  t.anchor_tsc = anchor;
  return t;
}

ClockTransform& ClockTransform::with_change(uint64_t change, int64_t ppb2) {
  if (std::llabs(ppb2) > int64_t(kMaxSkewPpm * 1000))
    throw std::invalid_argument(fmt::format("simulated clock: skew {} ppb beyond +-{} ppm", ppb2, kMaxSkewPpm));
  if (change < anchor_tsc)
    throw std::invalid_argument(
        fmt::format("simulated clock: rate change at TSC {} before the anchor {}", change, anchor_tsc));
  has_change = true;
  change_tsc = change;
  skew2_ppb = ppb2;
  return *this;
}

ClockTransform ClockTransform::parse(const std::string& spec, double tsc_hz) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(
        fmt::format("--simulate-clock {}: {} (want OFFSET_NS,SKEW_PPM, e.g. -2500000000,37.5)", spec, why));
  };
  std::vector<std::string> f;
  for (size_t at = 0;;) {
    size_t comma = spec.find(',', at);
    f.push_back(spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (f.size() == 1) throw bad("no comma");
  if (f.size() != 2 && f.size() != 4) throw bad("want 2 or 4 comma-separated fields");
  const std::string &a = f[0], &b = f[1];
  size_t used = 0;
  ClockTransform t;
  uint64_t change = 0;
  try {
    t.offset_ns = std::stoll(a, &used);
    if (used != a.size()) throw bad("OFFSET_NS '" + a + "' is not an integer");
    t.skew_ppm = std::stod(b, &used);
    if (used != b.size() || !std::isfinite(t.skew_ppm)) throw bad("SKEW_PPM '" + b + "' is not a number");
    if (f.size() == 4) {
      if (f[2].empty() || f[2][0] == '-') throw bad("CHANGE_TSC '" + f[2] + "' is not a TSC value");
      change = std::stoull(f[2], &used);
      if (used != f[2].size()) throw bad("CHANGE_TSC '" + f[2] + "' is not an integer");
      t.skew2_ppm = std::stod(f[3], &used);
      if (used != f[3].size() || !std::isfinite(t.skew2_ppm)) throw bad("SKEW2_PPM '" + f[3] + "' is not a number");
    }
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find("--simulate-clock") == 0) throw;
    throw bad("not numbers");
  } catch (const std::out_of_range&) {
    throw bad("number out of range");
  }
  if (f.size() == 4 && std::fabs(t.skew2_ppm) > kMaxSkewPpm) throw bad("|SKEW2_PPM| must be <= 1000");
  if (std::llabs(t.offset_ns) > kMaxOffsetNs) throw bad("|OFFSET_NS| must be <= 3600 s");
  if (std::fabs(t.skew_ppm) > kMaxSkewPpm) throw bad("|SKEW_PPM| must be <= 1000");
  if (!(tsc_hz > 0)) throw bad("TSC frequency unknown");
  t.enabled = true;
  t.tsc_hz = tsc_hz;
  t.offset_ticks = std::llround(double(t.offset_ns) * tsc_hz / 1e9);
  t.skew_ppb = std::llround(t.skew_ppm * 1000);
  t.anchor_tsc = 0;
  if (f.size() == 4) t.with_change(change, std::llround(t.skew2_ppm * 1000));
  return t;
}

uint64_t ClockTransform::apply(uint64_t x) const {
  if (!enabled) return x;
  i128 d = i128(x) - i128(anchor_tsc);
  if (!has_change || x <= change_tsc) return clamp_u64(i128(x) + offset_ticks + floor_div(d * skew_ppb, kPpbDen));
  i128 skew = (i128(change_tsc) - i128(anchor_tsc)) * skew_ppb + (i128(x) - i128(change_tsc)) * skew2_ppb;
  return clamp_u64(i128(x) + offset_ticks + floor_div(skew, kPpbDen));
}

uint64_t ClockTransform::undo(uint64_t y) const {
  if (!enabled) return y;
  if (apply(0) > y) return 0;
  // First guess from the real-valued inverse, then walk to the largest x with
  // apply(x) <= y (a few steps at most: the guess is within a tick or two).
  i128 num = (i128(y) - offset_ticks - i128(anchor_tsc)) * kPpbDen;
  i128 x = i128(anchor_tsc) + floor_div(num, kPpbDen + skew_ppb);
  if (has_change && x > i128(change_tsc)) {  // past the change: the second rate's inverse
    i128 yc = i128(apply(change_tsc));
    x = i128(change_tsc) + floor_div((i128(y) - yc) * kPpbDen, kPpbDen + skew2_ppb);
  }
  x = x < 0 ? 0 : x > i128(kMax) ? i128(kMax) : x;
  uint64_t g = uint64_t(x);
  while (g > 0 && apply(g) > y) --g;
  while (g < kMax && apply(g + 1) <= y) ++g;
  return g;
}

nlohmann::json ClockTransform::to_json() const {
  if (!enabled) return nullptr;
  nlohmann::json j = {{"enabled", true},
                      {"offset_ns", offset_ns},
                      {"skew_ppm", skew_ppm},
                      {"tsc_hz", tsc_hz},
                      {"offset_ticks", offset_ticks},
                      {"skew_ppb", skew_ppb},
                      {"anchor_tsc", anchor_tsc},
                      {"formula", "sim = tsc + offset_ticks + floor((tsc - anchor_tsc) * skew_ppb / 1e9)"}};
  if (has_change) {
    j["change_tsc"] = change_tsc, j["skew2_ppb"] = skew2_ppb, j["skew2_ppm"] = skew2_ppm;
    j["formula"] =
        "sim = tsc + offset_ticks + floor(((min(tsc, change_tsc) - anchor_tsc) * skew_ppb + "
        "max(tsc - change_tsc, 0) * skew2_ppb) / 1e9)";
  }
  return j;
}

ClockTransform ClockTransform::from_json(const nlohmann::json& j) {
  if (j.is_null() || !j.is_object() || !j.value("enabled", false)) return {};
  ClockTransform t = from_params(j.at("offset_ticks").get<int64_t>(), j.at("skew_ppb").get<int64_t>(),
                                 j.value("anchor_tsc", uint64_t(0)));
  t.offset_ns = j.value("offset_ns", int64_t(0));
  t.skew_ppm = j.value("skew_ppm", 0.0);
  t.tsc_hz = j.value("tsc_hz", 0.0);
  if (j.contains("change_tsc")) {
    t.with_change(j.at("change_tsc").get<uint64_t>(), j.at("skew2_ppb").get<int64_t>());
    t.skew2_ppm = j.value("skew2_ppm", 0.0);
  }
  return t;
}

std::string ClockTransform::warning() const {
  return fmt::format(
      "*** WARNING: SIMULATED CLOCK (test only): every timestamp this node writes is shifted by "
      "{} ns ({} ticks) and skewed by {} ppm ({} ppb, anchor TSC 0){}. Never use this for a real "
      "measurement. ***",
      offset_ns, offset_ticks, skew_ppm, skew_ppb,
      has_change ? fmt::format(", then by {} ppm ({} ppb) from TSC {} on", skew2_ppm, skew2_ppb, change_tsc) : "");
}

}  // namespace cptrace
