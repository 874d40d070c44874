// The handler table and the control socket's requests: see handler_table.h.
#include "probe/handler_table.h"

#include <fnmatch.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/core.h>

#include "cptrace.h"
#include "trace/json_text.h"
#include "clock/clock_now.h"

using nlohmann::json;

namespace cptrace {

namespace {

Instant now_instant(bool mono_first) {
  Instant i;
  if (!mono_first) i.tsc = __rdtsc();
  i.mono_ns = uint64_t(mono_ns());
  if (mono_first) i.tsc = __rdtsc();
  return i;
}

json instant_json(const Instant& i) { return {{"mono_ns", i.mono_ns}, {"tsc", i.tsc}}; }

cp_handler_rule rule_of(const HandlerSpec& s, uint64_t gen, double tsc_hz) {
  cp_handler_rule r{};
  r.kind = s.kind;
  r.gen = gen;
  r.p1 = s.p1;
  r.p2 = s.p2;
  if (s.kind == CP_H_COUNTER)  // the batch path counts in TSC ticks
    r.p2 = std::max<uint64_t>(1, uint64_t(std::llround(double(s.p1) * tsc_hz / 1e9)));
  return r;
}

}  // namespace

// ---- the table ----------------------------------------------------------------------

HandlerTable::HandlerTable(MapUpdate update, std::function<void()> enable, double tsc_hz, size_t capacity)
    : update_(std::move(update)), enable_(std::move(enable)), tsc_hz_(tsc_hz), capacity_(capacity) {}

const ConfigRule* HandlerTable::first_match(const std::string& name) const {
  for (const auto& r : rules_)
    if (r.pattern == "*" ? false : fnmatch(r.pattern.c_str(), name.c_str(), 0) == 0) return &r;
  return nullptr;
}

json HandlerTable::install(uint64_t id, const std::string& name, const HandlerSpec& spec, const std::string& source,
                           const std::string& rule) {
  cp_handler v{};
  v.cur = rule_of(spec, next_gen_, tsc_hz_);
  // What the channel followed until now: its own rule, else the default, else id.
  auto prev = installed_.find(id);
  if (prev == installed_.end()) prev = installed_.find(0);
  if (prev != installed_.end()) v.prev = rule_of_.at(prev->first);
  if (!enabled_) {
    enable_();
    enabled_ = true;
  }
  Instant before = now_instant(true);
  v.since_tsc = before.tsc;  // cp_logTS events carry their call's TSC
  int err = update_(id, v);
  Instant after = now_instant(false);
  if (err) throw std::runtime_error(fmt::format("updating the BPF handlers map for {}: {}", name, strerror(-err)));
  rule_of_[id] = v.cur;
  next_gen_++;
  installed_[id] = {name, spec};
  json c = {{"channel", id},
            {"name", name},
            {"handler", spec.name()},
            {"params", spec.params()},
            {"spec", spec.text},
            {"gen", v.cur.gen},
            {"source", source},
            {"rule", rule},
            {"before", instant_json(before)},
            {"after", instant_json(after)}};
  if (spec.kind == CP_H_COUNTER) c["period_ticks"] = v.cur.p2;  // the batch path's period
  history_.push_back(c);
  return c;
}

// After a write: only written entries may go, and only a write makes them so.
void HandlerTable::trim_history() {
  size_t excess = history_.size() > kHistoryKept ? history_.size() - kHistoryKept : 0;
  size_t drop = std::min(excess, written_);  // an entry not yet in the trace stays
  if (drop == 0) return;
  history_.erase(history_.begin(), history_.begin() + ptrdiff_t(drop));
  written_ -= drop;
  omitted_ += drop;
}

void HandlerTable::set_rules(std::vector<ConfigRule> rules) {
  std::lock_guard lk(mu_);
  rules_ = std::move(rules);
  for (const auto& r : rules_) {
    if (r.pattern == "*") {
      if (!installed_.count(0)) install(0, "*", r.spec, "config", r.pattern);
    } else if (!r.glob()) {
      uint64_t id = cp_channel_id(r.pattern.c_str());
      // An earlier glob line that matches the name wins (first match).
      if (first_match(r.pattern) == &r && !installed_.count(id)) install(id, r.pattern, r.spec, "config", r.pattern);
    }
  }
}

void HandlerTable::on_channel(uint64_t id, const std::string& name) {
  std::lock_guard lk(mu_);
  if (known_.count(id) && !known_[id].empty()) return;
  known_[id] = name;
  if (name.empty() || installed_.count(id)) return;
  if (const ConfigRule* r = first_match(name); r && r->glob()) install(id, name, r->spec, "pattern", r->pattern);
}

json HandlerTable::set(const std::string& channel, const HandlerSpec& spec) {
  std::lock_guard lk(mu_);
  std::vector<std::pair<uint64_t, std::string>> targets;
  bool glob = channel.find_first_of("*?[") != std::string::npos && channel != "*";
  if (channel == "*") {
    targets.push_back({0, "*"});
  } else if (glob) {
    for (auto& [id, name] : known_)
      if (!name.empty() && fnmatch(channel.c_str(), name.c_str(), 0) == 0) targets.push_back({id, name});
  } else if (channel.rfind("0x", 0) == 0) {
    uint64_t id = 0;
    auto [p, ec] = std::from_chars(channel.data() + 2, channel.data() + channel.size(), id, 16);
    if (ec == std::errc() && p == channel.data() + channel.size() && known_.count(id))
      targets.push_back({id, known_[id]});
  } else {  // by its announced name (a name cut to CP_CHANNEL_NAME_MAX-1 bytes has the id of the full one)
    for (auto& [id, name] : known_)
      if (name == channel) targets.push_back({id, name});
  }
  if (targets.empty()) {
    std::string names;
    for (auto& [id, name] : known_)
      names += (names.empty() ? "" : ", ") + (name.empty() ? fmt::format("0x{:016x}", id) : name);
    throw std::invalid_argument(fmt::format("unknown channel `{}`{} (known: {})", channel,
                                            glob ? " (the pattern matches no known channel)" : "",
                                            names.empty() ? "none yet" : names));
  }
  check_room(targets, glob ? channel : "");
  json changes = json::array();
  for (auto& [id, name] : targets) {
    try {
      changes.push_back(install(id, name, spec, "control", channel));
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(fmt::format("{} (after {} of {} channels changed, kept in the history{})", e.what(),
                                           changes.size(), targets.size(),
                                           glob ? "; the pattern is not kept for later channels" : ""));
    }
  }
  if (glob) {  // also for channels announced later; ahead of the config file's rules
    // The same pattern set again replaces itself: first match wins, so an older
    // copy behind it never matched anything; the list stays bounded.
    std::erase_if(rules_, [&](const ConfigRule& r) { return r.pattern == channel; });
    ConfigRule r;
    r.pattern = channel;
    r.spec = spec;
    rules_.insert(rules_.begin(), r);
  }
  return changes;
}

// Refuses, before any write, a change the map or the rule list cannot take.
void HandlerTable::check_room(const std::vector<std::pair<uint64_t, std::string>>& targets,
                              const std::string& glob) const {
  size_t added = 0;
  for (const auto& t : targets) added += !installed_.count(t.first);
  if (installed_.size() + added > capacity_)
    throw std::invalid_argument(fmt::format(
        "the handlers map holds {} channels: {} have a handler, this change would add {} (set fewer, or set the "
        "default `*`)",
        capacity_, installed_.size(), added));
  size_t globs = 0;
  bool again = false;
  for (const auto& r : rules_) globs += r.glob(), again = again || r.pattern == glob;
  if (!glob.empty() && !again && globs >= kMaxControlGlobs)
    throw std::invalid_argument(fmt::format(
        "{} patterns are kept already (at most {}): set an existing one again, or a name", globs, kMaxControlGlobs));
}

json HandlerTable::current() const {
  std::lock_guard lk(mu_);
  json cur = json::array();
  for (auto& [id, v] : installed_) cur.push_back({{"channel", id}, {"name", v.first}, {"spec", v.second.text}});
  return cur;
}

bool HandlerTable::take_pending(EncodedFrame& f) {
  std::lock_guard lk(mu_);
  if (written_ == history_.size()) return false;
  json a(history_.begin() + written_, history_.end());
  f = encode_json(FrameType::Handlers, json_text(a), uint32_t(a.size()));
  written_ = history_.size();
  trim_history();
  return true;
}

json HandlerTable::history() const {
  std::lock_guard lk(mu_);
  return history_;
}

uint64_t HandlerTable::history_omitted() const {
  std::lock_guard lk(mu_);
  return omitted_;
}

bool HandlerTable::any() const {
  std::lock_guard lk(mu_);
  return enabled_;
}

json handle_control(HandlerTable& table, const json& req) {
  if (!req.is_object()) throw std::invalid_argument("request is not a JSON object");
  std::string cmd = req.value("cmd", "");
  if (cmd == "get")
    return {{"ok", true},
            {"handlers", table.current()},
            {"history", table.history()},
            {"history_omitted", table.history_omitted()}};
  if (cmd != "set") throw std::invalid_argument(fmt::format("unknown request `{}` (set or get)", cmd));
  std::string channel = req.at("channel").get<std::string>();
  // Parse first: a bad handler leaves the running configuration untouched.
  HandlerSpec spec = parse_handler(req.at("handler").get<std::vector<std::string>>());
  return {{"ok", true}, {"changes", table.set(channel, spec)}};
}

}  // namespace cptrace
