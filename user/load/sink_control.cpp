#include "load/sink_control.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "clock/clock_now.h"
#include "os/socket_io.h"
#include "os/time_units.h"

namespace cptrace {

using nlohmann::json;

double slope_per_s(const std::vector<std::pair<int64_t, uint64_t>>& pts) {
  if (pts.size() < 2) return 0;
  // Centered sums: no cancellation with ns-scale x values.
  double mx = 0, my = 0;
  for (auto& [x, y] : pts) {
    mx += double(x - pts[0].first);
    my += double(y);
  }
  mx /= double(pts.size());
  my /= double(pts.size());
  double sxy = 0, sxx = 0;
  for (auto& [x, y] : pts) {
    double dx = double(x - pts[0].first) - mx;
    sxy += dx * (double(y) - my);
    sxx += dx * dx;
  }
  return sxx > 0 ? sxy / sxx * 1e9 : 0;
}

RoundResult RoundResult::from_json(const json& j) {
  RoundResult r;
  r.expected = j.value("expected", 0ull);
  r.emitted = j.value("emitted", 0ull);
  r.unique = j.value("unique", 0ull);
  r.duplicates = j.value("duplicates", 0ull);
  r.missing = j.value("missing", 0ull);
  r.outside = j.value("outside", 0ull);
  r.lost = j.value("lost", 0ull);
  r.lag_tuples = j.value("lag_tuples", 0ull);
  r.intake_rate = j.value("intake_rate", 0.0);
  r.drain_s = j.value("drain_s", 0.0);
  r.first_missing = j.value("first_missing", UINT64_MAX);
  return r;
}

json RoundResult::to_json() const {
  json j = {{"expected", expected},       {"emitted", emitted}, {"unique", unique}, {"duplicates", duplicates},
            {"missing", missing},         {"outside", outside}, {"lost", lost},     {"lag_tuples", lag_tuples},
            {"intake_rate", intake_rate}, {"drain_s", drain_s}};
  if (first_missing != UINT64_MAX) j["first_missing"] = first_missing;
  return j;
}

// ---- server ----------------------------------------------------------------

ControlServer::ControlServer(const SinkOptions& o, SinkState& st) : o_(o), st_(st) {
  port_ = o.control_port ? o.control_port : uint16_t(o.port + 1);
  listen_fd_ = listen_on(o.bind, port_, SOCK_STREAM);
  th_ = std::thread([this] { loop(); });
}

ControlServer::~ControlServer() {
  st_.stop = true;
  if (th_.joinable()) th_.join();
  close(listen_fd_);
}

void ControlServer::loop() {
  while (!st_.stop.load()) {
    pollfd pf{listen_fd_, POLLIN, 0};
    if (poll(&pf, 1, 100) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serve(fd);
    close(fd);
  }
}

// One client at a time; between requests, samples the round's progress every 10 ms.
void ControlServer::serve(int fd) {
  std::string buf;
  char tmp[4096];
  while (!st_.stop.load()) {
    pollfd pf{fd, POLLIN, 0};
    int pr = poll(&pf, 1, 10);
    sample();
    if (pr <= 0) continue;
    ssize_t r = recv(fd, tmp, sizeof tmp, 0);
    if (r <= 0) return;
    buf.append(tmp, size_t(r));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      json reply;
      try {
        reply = handle(json::parse(line));
      } catch (const std::exception& e) {
        reply = {{"ok", false}, {"error", e.what()}};
      }
      std::string out = reply.dump() + "\n";
      if (!send_all(fd, out)) return;
    }
  }
}

void ControlServer::sample() {
  std::lock_guard lk(st_.mu);
  if (st_.in_round) samples_.emplace_back(mono_ns(), st_.round_unique.load());
}

json ControlServer::handle(const json& req) {
  std::string op = req.at("op");
  if (op == "begin") {
    std::lock_guard lk(st_.mu);
    st_.ledger.reset_closed(req.at("first_id"), req.at("count"));
    st_.round_unique = 0;
    st_.in_round = true;
    rate_ = req.value("rate", 0.0);
    begin_ns_ = mono_ns();
    samples_.clear();
    samples_.emplace_back(begin_ns_, 0);
    return {{"ok", true}};
  }
  if (op == "end") return end_round(req.at("emitted"));
  if (op == "stats") {
    std::lock_guard lk(st_.mu);
    return {{"ok", true},
            {"received", st_.received.load()},
            {"rounds", st_.rounds_done},
            {"unique", st_.ledger.unique()},
            {"duplicates", st_.ledger.duplicates()},
            {"malformed", st_.malformed.load()}};
  }
  throw std::runtime_error("unknown op '" + op + "'");
}

json ControlServer::end_round(uint64_t emitted) {
  int64_t t_end = mono_ns();
  sample();
  uint64_t at_end = st_.round_unique.load();
  // Drain: wait for the tuples still in flight or queued.
  uint64_t last = at_end;
  int64_t last_change = t_end, t_done = t_end;
  while (st_.round_unique.load() < emitted && !st_.stop.load()) {
    int64_t now = mono_ns();
    uint64_t u = st_.round_unique.load();
    if (u != last) {
      last = u;
      last_change = now;
    }
    if (now - last_change > int64_t(seconds_to_ns(o_.drain_idle_s)) ||
        now - t_end > int64_t(seconds_to_ns(o_.drain_max_s)))
      break;
    usleep(2000);
  }
  if (st_.round_unique.load() >= emitted)
    t_done = mono_ns();
  else
    t_done = last_change;

  std::vector<std::pair<int64_t, uint64_t>> second_half;
  int64_t mid = begin_ns_ + (t_end - begin_ns_) / 2;
  for (auto& s : samples_)
    if (s.first >= mid && s.first <= t_end) second_half.push_back(s);

  std::lock_guard lk(st_.mu);
  const IdLedger& L = st_.ledger;
  RoundResult r;
  r.expected = L.expected();
  r.emitted = emitted;
  r.unique = L.unique();
  r.duplicates = L.duplicates();
  r.missing = L.missing();
  r.outside = L.outside();
  r.lost = emitted > r.unique ? emitted - r.unique : 0;
  r.lag_tuples = emitted > at_end ? emitted - at_end : 0;
  r.intake_rate = slope_per_s(second_half);
  r.drain_s = ns_to_seconds(t_done - t_end);
  if (r.missing) r.first_missing = L.first_missing();
  json j = r.to_json();
  j["round"] = st_.rounds_done;
  st_.round_log.push_back(j);
  st_.in_round = false;
  st_.rounds_done++;
  if (o_.rounds && st_.rounds_done >= o_.rounds) st_.stop = true;
  j["ok"] = true;
  return j;
}

// ---- client ----------------------------------------------------------------

SinkControl::SinkControl(const Endpoint& e) : ep_(e) {
  fd_ = connect_to(e, SOCK_STREAM);
  timeval tv{300, 0};  // the sink answers `end` after draining: allow a slow drain
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

SinkControl::~SinkControl() { close(fd_); }

json SinkControl::call(const json& req) {
  std::string out = req.dump() + "\n", line;
  if (!send_all(fd_, out) || !read_line(fd_, line))
    throw std::runtime_error(
        fmt::format("sink control {}: connection lost ({})", ep_.str(), errno ? strerror(errno) : "closed"));
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.value("ok", false))
    throw std::runtime_error(fmt::format("sink control {}: {}", ep_.str(),
                                         j.is_discarded() ? "unreadable reply" : j.value("error", "refused")));
  return j;
}

void SinkControl::begin(uint64_t first_id, uint64_t count, double rate, double duration_s) {
  call({{"op", "begin"}, {"first_id", first_id}, {"count", count}, {"rate", rate}, {"duration", duration_s}});
}

RoundResult SinkControl::end(uint64_t emitted) {
  return RoundResult::from_json(call({{"op", "end"}, {"emitted", emitted}}));
}

}  // namespace cptrace
