// What the translation tests compare against: the exact (long double) clock
// map of a recorded node, and the error a translation stops with.
#pragma once
#include <exception>
#include <string>
#include <vector>

#include "trace/trace_format.h"
#include "translate/translate.h"

namespace truth {

// Piecewise-linear interpolation over clock points, like ClockMap but exact in
// long double (no rounding to ticks or ns): TSC -> mono ns when tsc_to_mono.
inline long double interp(const std::vector<cptrace::ClockPoint>& p, long double x, bool tsc_to_mono) {
  auto X = [&](size_t i) { return (long double)(tsc_to_mono ? p[i].tsc : p[i].mono_ns); };
  auto Y = [&](size_t i) { return (long double)(tsc_to_mono ? p[i].mono_ns : p[i].tsc); };
  size_t i = 0;
  while (i + 2 < p.size() && X(i + 1) <= x) ++i;
  return Y(i) + (x - X(i)) * (Y(i + 1) - Y(i)) / (X(i + 1) - X(i));
}

// The message translate() throws with, "" when it succeeds.
inline std::string translate_error(const cptrace::TranslateOptions& o) {
  try {
    cptrace::translate(o);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace truth
