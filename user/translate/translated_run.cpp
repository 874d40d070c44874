#include "translate/translated_run.h"

#include <stdexcept>

#include <fmt/format.h>

#include "trace/trace_reader.h"

namespace cptrace {
namespace {

// A string field of `j`, or `fallback` where it is missing.
std::string text_of(const nlohmann::json& j, const char* key, const char* fallback) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string()) throw std::runtime_error(fmt::format("meta.json translated.{}: not a string", key));
  return j[key].get<std::string>();
}

// An array field of `j` (empty where missing).
const nlohmann::json& array_of(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  if (!j.contains(key)) return empty;
  if (!j[key].is_array()) throw std::runtime_error(fmt::format("meta.json translated.{}: not an array", key));
  return j[key];
}

// Element i of an array of unsigned numbers.
uint64_t number_at(const nlohmann::json& a, size_t i, const char* what) {
  if (!a.is_array() || a.size() <= i || !a[i].is_number_unsigned())
    throw std::runtime_error(fmt::format("meta.json translated.{}: not an array of TSC values", what));
  return a[i].get<uint64_t>();
}

void read_frequency(const nlohmann::json& f, TranslatedRun& run) {
  auto hz = [&](const char* key) {
    if (!f.contains(key)) return 0.0;
    if (!f[key].is_number())
      throw std::runtime_error(fmt::format("meta.json translated.frequency.{}: not a number", key));
    return f[key].get<double>();
  };
  run.hz = hz("hz"), run.hz_lo = hz("hz_lo"), run.hz_hi = hz("hz_hi");
  run.have_ns = f.contains("hz_lo");
}

}  // namespace

std::optional<TranslatedRun> TranslatedRun::of(const nlohmann::json& meta) {
  if (!meta.is_object() || !meta.contains("translated")) return std::nullopt;
  const nlohmann::json& tr = meta["translated"];
  if (!tr.is_object()) throw std::runtime_error("meta.json translated: not an object");
  TranslatedRun run;
  run.reference = text_of(tr, "reference", "");
  run.method = text_of(tr, "method", "");
  for (const nlohmann::json& n : array_of(tr, "nodes")) {
    run.node_names.push_back(n.is_object() ? text_of(n, "node", "") : "");
    if (n.is_object() && run.node_names.back() == run.reference && n.contains("span_tsc"))
      run.ref_origin = number_at(n["span_tsc"], 0, "nodes[].span_tsc");
  }
  if (tr.contains("frequency")) read_frequency(tr["frequency"], run);
  for (const nlohmann::json& f : array_of(tr, "suspect_sync")) run.suspect_sync.push_back(SyncFinding::from_json(f));
  for (const nlohmann::json& p : array_of(tr, "unauthenticated_rounds"))
    run.unauthenticated_rounds.push_back(p.is_string() ? p.get<std::string>() : p.dump());
  return run;
}

TranslatedRun TranslatedRun::read(const TraceReader& r) {
  std::optional<TranslatedRun> run = of(r.meta());
  if (!run) throw std::runtime_error(r.events_path() + ": not a translated trace");
  return *run;
}

}  // namespace cptrace
