// meta.json "translated" of a translated trace, all but what writing the events
// adds (each node's event counts, the seconds): reference, method, the physics
// check, every pair's relations, each node's path and relation to the
// reference, the reference's TSC frequency, the nodes' CLOCK_REALTIME offsets;
// and the Channels frame (every node's channels).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "translate/reference_paths.h"

namespace cptrace {

// The whole meta.json to write before the events (its "complete" false).
// Warns on stderr of pairs whose rounds were taken without a key.
nlohmann::json translated_meta(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes, size_t ref,
                               const PairMap& pairs, const ReferencePaths& paths, const nlohmann::json& sync_check,
                               const std::vector<SyncFinding>& findings, const PacketMatches& packets);

// meta.json "translated"."frequency": the reference's TSC frequency for seconds,
// from its clock-stream points nearest to the first MinRTT1 and last MinRTT2
// instants on it, as a strict interval against CLOCK_MONOTONIC_RAW
// (clock/tsc_frequency.h: why not MONOTONIC); "error" where none can be had.
nlohmann::json measure_frequency(const TranslateNode& ref, const PairMap& pairs, size_t ref_idx);

// The Channels frame's list: every node's channels by id.
nlohmann::json channels_json(const std::vector<TranslateNode>& nodes);

}  // namespace cptrace
