#include "trace/pid_table.h"

#include <stdexcept>

namespace cptrace {

namespace {

PidEntry entry_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("processes frame: an entry is not an object");
  PidEntry e;
  e.pid = j.at("pid").get<uint32_t>();
  e.nspid = j.at("nspid").get<uint32_t>();
  e.pidns = j.at("pidns").get<uint64_t>();
  e.mono_offset_ns = j.value("mono_offset_ns", int64_t(0));
  e.mono_offset_unknown = j.value("mono_offset_unknown", false);
  e.cgroup = j.value("cgroup", std::string());
  e.container_id = j.value("container_id", std::string());
  return e;
}

}  // namespace

std::optional<uint32_t> PidTable::container_pid(uint32_t pid) const {
  auto it = by_pid.find(pid);
  if (it == by_pid.end() || it->second.pidns == recorder_pidns) return std::nullopt;
  return it->second.nspid;
}

std::string PidTable::text_suffix(uint32_t pid) const {
  auto ns = container_pid(pid);
  return ns ? " nspid=" + std::to_string(*ns) : std::string();
}

std::string PidTable::csv_field(uint32_t pid) const {
  auto ns = container_pid(pid);
  return ns ? std::to_string(*ns) : std::string();
}

bool PidTable::any_container() const {
  for (const auto& [pid, e] : by_pid)
    if (e.pidns != recorder_pidns) return true;
  return false;
}

// All or nothing: a frame with one malformed entry changes nothing.
void PidTable::merge(const nlohmann::json& frame) {
  if (!frame.is_object() || !frame.contains("processes") || !frame["processes"].is_array())
    throw std::runtime_error("processes frame: not an object with a \"processes\" array");
  uint64_t ns = frame.at("pidns").get<uint64_t>();
  std::vector<PidEntry> add;
  for (const auto& j : frame["processes"]) add.push_back(entry_from_json(j));
  recorder_pidns = ns;
  for (const PidEntry& e : add) by_pid[e.pid] = e;
}

nlohmann::json PidTable::to_json() const {
  std::vector<PidEntry> v;
  for (const auto& [pid, e] : by_pid) v.push_back(e);
  return pid_frame_json(recorder_pidns, v);
}

std::string container_id_of_cgroup(const std::string& cgroup) {
  std::string last = cgroup.substr(cgroup.rfind('/') + 1);
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  for (size_t i = 0; i + 64 <= last.size(); i++) {
    size_t n = 0;
    while (i + n < last.size() && hex(last[i + n])) n++;
    if (n == 64 && (i == 0 || !hex(last[i - 1]))) return last.substr(i, 64);
    i += n;
  }
  return "";
}

nlohmann::json pid_frame_json(uint64_t recorder_pidns, const std::vector<PidEntry>& entries) {
  nlohmann::json a = nlohmann::json::array();
  for (const PidEntry& e : entries) {
    nlohmann::json j = {{"pid", e.pid}, {"nspid", e.nspid}, {"pidns", e.pidns}};
    if (e.mono_offset_ns) j["mono_offset_ns"] = e.mono_offset_ns;
    if (e.mono_offset_unknown) j["mono_offset_unknown"] = true;
    if (!e.cgroup.empty()) j["cgroup"] = e.cgroup;
    if (!e.container_id.empty()) j["container_id"] = e.container_id;
    a.push_back(j);
  }
  return {{"pidns", recorder_pidns}, {"processes", a}};
}

}  // namespace cptrace
