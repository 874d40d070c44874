// meta.json "translated" as the commands that read a translated trace take it
// (latency, report, dump, export): read once, typed, instead of each command
// indexing the JSON. The relations and bounds stay DurationBounds::from_translated's.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/sync_sanity.h"

namespace cptrace {

class TraceReader;

struct TranslatedRun {
  std::string reference;  // the node whose TSC is the timebase
  std::string method;  // --method as translate ran it
  std::vector<std::string> node_names;  // by the node index events carry
  std::vector<SyncFinding> suspect_sync;  // accepted with --accept-suspect-sync
  std::vector<std::string> unauthenticated_rounds;  // pairs whose rounds had no key
  uint64_t ref_origin = 0;  // the reference's first TSC (its span_tsc[0]): where its time axis starts
  // The reference's TSC frequency, a strict interval (translated.frequency);
  // have_ns false where translate could measure none (durations then in ticks).
  bool have_ns = false;
  double hz = 0, hz_lo = 0, hz_hi = 0;

  // nullopt for a meta.json without "translated" (one node's own trace).
  // Throws std::runtime_error naming the field that is malformed.
  static std::optional<TranslatedRun> of(const nlohmann::json& meta);
  // The reader's, which must be a translated trace (else "not a translated trace").
  static TranslatedRun read(const TraceReader& r);

  // "A" for node 0 and so on; the index itself where the meta names none.
  std::string node_name(size_t i) const { return i < node_names.size() ? node_names[i] : std::to_string(i); }
};

}  // namespace cptrace
