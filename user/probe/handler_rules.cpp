#include "probe/handler_rules.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>

namespace cptrace {

namespace {

constexpr const char* kHandlerList = "id, downsample N, xoy X Y, firstlast, counter PERIOD, null";

uint64_t parse_uint(const std::string& w, const std::string& what) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
  if (ec != std::errc() || p != w.data() + w.size())
    throw std::invalid_argument(fmt::format("{}: `{}` is not a non-negative integer", what, w));
  return v;
}

// "10ms" -> 10000000. A unit is required: a bare number is ambiguous.
uint64_t parse_period_ns(const std::string& w) {
  size_t i = 0;
  while (i < w.size() && isdigit(static_cast<unsigned char>(w[i]))) i++;
  std::string num = w.substr(0, i), unit = w.substr(i);
  static const std::map<std::string, uint64_t> units = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
  auto u = units.find(unit);
  if (num.empty() || u == units.end())
    throw std::invalid_argument(
        fmt::format("counter PERIOD: `{}` is not a period (a whole number with unit ns, us, ms or s, e.g. 10ms)", w));
  uint64_t n = parse_uint(num, "counter PERIOD");
  if (n == 0 || n > UINT64_MAX / u->second / 4)
    throw std::invalid_argument(fmt::format("counter PERIOD: `{}` is out of range", w));
  uint64_t ns = n * u->second;
  if (ns < 1000) throw std::invalid_argument(fmt::format("counter PERIOD: `{}` is below the minimum of 1us", w));
  return ns;
}

void want_params(const std::vector<std::string>& w, size_t n, const std::string& usage) {
  if (w.size() - 1 != n)
    throw std::invalid_argument(
        fmt::format("handler `{}` takes {} parameter(s) ({}), got {}", w[0], n, usage, w.size() - 1));
}

}  // namespace

// ---- parsing ------------------------------------------------------------------------

std::string HandlerSpec::name() const {
  switch (kind) {
    case CP_H_ID:
      return "id";
    case CP_H_DOWNSAMPLE:
      return "downsample";
    case CP_H_XOY:
      return "xoy";
    case CP_H_FIRSTLAST:
      return "firstlast";
    case CP_H_COUNTER:
      return "counter";
    case CP_H_NULL:
      return "null";
  }
  return "unknown";
}

std::vector<uint64_t> HandlerSpec::params() const {
  switch (kind) {
    case CP_H_DOWNSAMPLE:
      return {p1};
    case CP_H_XOY:
      return {p1, p2};
    case CP_H_COUNTER:
      return {p1};  // ns
  }
  return {};
}

HandlerSpec parse_handler(const std::vector<std::string>& w) {
  if (w.empty()) throw std::invalid_argument(fmt::format("missing handler (one of: {})", kHandlerList));
  HandlerSpec s;
  const std::string& h = w[0];
  if (h == "id" || h == "firstlast" || h == "null") {
    want_params(w, 0, "none");
    s.kind = h == "id" ? CP_H_ID : h == "null" ? CP_H_NULL : CP_H_FIRSTLAST;
    s.text = h;
  } else if (h == "downsample") {
    want_params(w, 1, "N >= 1");
    s.kind = CP_H_DOWNSAMPLE;
    s.p1 = parse_uint(w[1], "downsample N");
    if (s.p1 == 0) throw std::invalid_argument("downsample N: must be >= 1");
    s.text = fmt::format("downsample {}", s.p1);
  } else if (h == "xoy") {
    want_params(w, 2, "X Y with 0 <= X <= Y, Y >= 1");
    s.kind = CP_H_XOY;
    s.p1 = parse_uint(w[1], "xoy X");
    s.p2 = parse_uint(w[2], "xoy Y");
    if (s.p2 == 0) throw std::invalid_argument("xoy Y: must be >= 1");
    if (s.p1 > s.p2) throw std::invalid_argument(fmt::format("xoy X Y: X ({}) must be <= Y ({})", s.p1, s.p2));
    s.text = fmt::format("xoy {} {}", s.p1, s.p2);
  } else if (h == "counter") {
    want_params(w, 1, "PERIOD, e.g. 10ms");
    s.kind = CP_H_COUNTER;
    s.p1 = parse_period_ns(w[1]);
    s.text = "counter " + w[1];
  } else {
    throw std::invalid_argument(fmt::format("unknown handler `{}` (one of: {})", h, kHandlerList));
  }
  return s;
}

bool ConfigRule::glob() const { return pattern.find_first_of("*?[") != std::string::npos; }

std::vector<ConfigRule> parse_config_text(const std::string& text, const std::string& file) {
  std::vector<ConfigRule> rules;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream ws(line);
    std::vector<std::string> words;
    for (std::string w; ws >> w;) words.push_back(w);
    if (words.empty()) continue;
    try {
      if (words[0].size() >= CP_CHANNEL_NAME_MAX)
        throw std::invalid_argument(fmt::format("channel pattern longer than {} bytes", CP_CHANNEL_NAME_MAX - 1));
      ConfigRule r;
      r.pattern = words[0];
      r.line = no;
      r.spec = parse_handler({words.begin() + 1, words.end()});
      rules.push_back(std::move(r));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{}:{}: {}", file, no, e.what()));
    }
  }
  return rules;
}

std::vector<ConfigRule> parse_config_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::invalid_argument(fmt::format("--config {}: {}", path, strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_config_text(ss.str(), path);
}

}  // namespace cptrace
