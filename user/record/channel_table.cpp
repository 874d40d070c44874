#include "record/channel_table.h"

#include <algorithm>
#include <exception>

#include "probe/proc_registry.h"
#include "trace/json_text.h"

namespace cptrace {

namespace {

nlohmann::json to_json(const std::vector<ChannelInfo>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& c : v) a.push_back({{"id", c.id}, {"name", c.name}, {"pid", c.pid}});
  return a;
}

}  // namespace

void ChannelTable::add(const ChannelInfo& announced) {
  // The traced program chose the name: every output (JSON frames, meta.json,
  // handler rules, the control socket's answers) gets it as valid text.
  ChannelInfo c = announced;
  c.name = valid_utf8(c.name);
  {
    std::lock_guard lk(mu_);
    auto [it, fresh] = all_.try_emplace(c.id, c);
    if (!fresh && !(it->second.name.empty() && !c.name.empty())) return;
    it->second = c;
    pending_.push_back(c);
  }
  if (on_new) on_new(c);
}

void ChannelTable::add_registry(pid_t pid) {
  try {
    uint64_t refused = 0;
    for (const auto& e : read_process_registry(pid, &refused)) add(ChannelInfo{e.id, e.name, uint32_t(pid)});
    if (refused) {
      std::lock_guard lk(mu_);
      refused_[pid] = std::max(refused_[pid], refused);
    }
  } catch (const std::exception&) {
    // The process may have exited or not use libcptrace's registry: names then
    // come only from the announce probe.
  }
}

bool ChannelTable::take_pending(EncodedFrame& f) {
  std::lock_guard lk(mu_);
  if (pending_.empty()) return false;
  f = encode_json(FrameType::Channels, json_text(to_json(pending_)), pending_.size());
  pending_.clear();
  return true;
}

nlohmann::json ChannelTable::refused_json() {
  std::lock_guard lk(mu_);
  nlohmann::json j = nlohmann::json::object();
  for (auto [pid, n] : refused_) j[std::to_string(pid)] = n;
  return j;
}

nlohmann::json ChannelTable::all_json() {
  std::lock_guard lk(mu_);
  std::vector<ChannelInfo> v;
  for (auto& [id, c] : all_) v.push_back(c);
  return to_json(v);
}

}  // namespace cptrace
