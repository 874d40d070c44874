// The least-squares slope of y over x, for the two fits of a correlation stream:
// the TSC frequency (ClockMap::tsc_hz) and the RAW line (raw_witness.h). Callers
// pass offsets from their first point, so the long double sums stay exact
// enough over hours.
#pragma once
#include <vector>

namespace cptrace {

inline long double least_squares_slope(const std::vector<long double>& x, const std::vector<long double>& y) {
  long double n = (long double)x.size(), mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i], my += y[i];
  mx /= n, my /= n;
  long double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  return sxx > 0 ? sxy / sxx : 0;
}

}  // namespace cptrace
