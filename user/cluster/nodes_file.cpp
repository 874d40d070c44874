#include "cluster/nodes_file.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <fmt/core.h>

namespace cptrace {

namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A string (split on blanks) or an array of strings.
std::vector<std::string> argv_field(const nlohmann::json& j, const std::string& node, const char* field) {
  if (j.is_string()) return words(j.get<std::string>());
  if (!j.is_array()) throw std::runtime_error(fmt::format("node {}: \"{}\" must be a string or an array", node, field));
  std::vector<std::string> out;
  for (const auto& w : j) {
    if (!w.is_string()) throw std::runtime_error(fmt::format("node {}: \"{}\" holds a non-string", node, field));
    out.push_back(w.get<std::string>());
  }
  return out;
}

// A field of the right type, or `def` where absent: a wrong type is named
// (the file is the user's, not a raw json error).
template <typename T>
T field(const nlohmann::json& j, const char* key, T def, const std::string& where, const char* type) {
  if (!j.contains(key)) return def;
  const nlohmann::json& v = j[key];
  if (std::is_same_v<T, bool> ? !v.is_boolean() : !v.is_string())
    throw std::runtime_error(fmt::format("{}: \"{}\" must be {}", where, key, type));
  return v.get<T>();
}

std::string text(const nlohmann::json& j, const char* key, const std::string& def, const std::string& where) {
  return field<std::string>(j, key, def, where, "a string");
}

// A node's name becomes a directory name under RUN/ and on the node.
void check_name(const std::string& name, size_t index) {
  bool ok = !name.empty() && name.size() <= 64 && name != "." && name != "..";
  for (char c : name) ok = ok && (isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.');
  if (!ok)
    throw std::runtime_error(
        fmt::format("node #{}: name \"{}\" must be 1-64 letters, digits, '.', '-' or '_'", index + 1, name));
}

bool is_ssh(const std::vector<std::string>& t) {
  if (t.empty()) return false;
  auto slash = t[0].rfind('/');
  return t[0].substr(slash == std::string::npos ? 0 : slash + 1) == "ssh";
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// HOST, HOST:PORT, V6, [V6] or [V6]:PORT -> an address `record --peers` takes,
// the default responder port 7711 when none is given.
std::string with_port(const std::string& a) {
  if (a.front() == '[') return a.find("]:") != std::string::npos ? a : a + ":7711";
  size_t colons = std::count(a.begin(), a.end(), ':');
  if (colons > 1) return "[" + a + "]:7711";
  return colons == 1 ? a : a + ":7711";
}

}  // namespace

ClusterSpec parse_nodes(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty())
    throw std::runtime_error("nodes file: an object with a non-empty \"nodes\" array expected");
  const std::string def_cptrace = text(j, "cptrace", "cptrace", "nodes file");
  const std::string def_dir = text(j, "dir", "/var/lib/cptrace/cluster", "nodes file");
  ClusterSpec spec;
  std::set<std::string> names;
  for (size_t i = 0; i < j["nodes"].size(); ++i) {
    const auto& e = j["nodes"][i];
    if (!e.is_object()) throw std::runtime_error(fmt::format("nodes file: node {} is not an object", i));
    ClusterNode n;
    n.name = text(e, "name", "", fmt::format("node {}", i));
    check_name(n.name, i);
    if (!names.insert(n.name).second) throw std::runtime_error(fmt::format("node {}: named twice", n.name));
    const std::string where = "node " + n.name;
    const std::string host = text(e, "host", "", where);
    if (e.contains("transport"))
      n.transport = argv_field(e["transport"], n.name, "transport");
    else if (!host.empty())
      n.transport = {"ssh", "-o", "BatchMode=yes", host};  // the user's keys and config; never a prompt
    if (n.transport.empty())
      throw std::runtime_error(fmt::format("node {}: give \"host\" (reached by ssh) or \"transport\"", n.name));
    n.shell_transport = field<bool>(e, "shell", is_ssh(n.transport), where, "true or false");
    n.cptrace = text(e, "cptrace", def_cptrace, where);
    n.dir = text(e, "dir", def_dir, where);
    n.minrtt = text(e, "minrtt", host, where);
    if (n.minrtt.empty())
      throw std::runtime_error(
          fmt::format("node {}: \"minrtt\" (its address, HOST[:PORT]) is needed without \"host\"", n.name));
    n.minrtt = with_port(n.minrtt);
    if (e.contains("command")) n.command = argv_field(e["command"], n.name, "command");
    if (e.contains("record")) n.record = argv_field(e["record"], n.name, "record");
    spec.nodes.push_back(std::move(n));
  }
  return spec;
}

ClusterSpec read_nodes_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read nodes file {}", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("nodes file {}: {}", path, e.what()));
  }
  return parse_nodes(j);
}

nlohmann::json to_json(const ClusterNode& n) {
  return {{"name", n.name},       {"transport", n.transport}, {"shell", n.shell_transport},
          {"cptrace", n.cptrace}, {"minrtt", n.minrtt},       {"dir", n.dir},
          {"command", n.command}, {"record", n.record}};
}

std::vector<std::string> remote_argv(const ClusterNode& n, const std::vector<std::string>& args) {
  std::vector<std::string> argv = n.transport;
  argv.push_back(n.shell_transport ? shell_quote(n.cptrace) : n.cptrace);
  for (const auto& a : args) argv.push_back(n.shell_transport ? shell_quote(a) : a);
  return argv;
}

std::vector<size_t> rounds_peers(size_t i) {
  if (i == 0) return {};
  if (i == 1) return {0};
  return {0, i - 1};
}

}  // namespace cptrace
