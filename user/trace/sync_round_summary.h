// MinRTT rounds summarized per peer and phase: what `record` writes into
// meta.json, `sync` prints and `info` shows (as its own text). Here, beside
// sync_round.h, because both the recording branch (which takes rounds) and
// analysis (which reads them back) need the one summary; no printing here.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/sync_round.h"

namespace cptrace {

// Kernel / user-space MinRTT of a set of rounds, per peer and phase.
nlohmann::json summarize_rounds(const std::vector<SyncRound>& rounds, double tsc_hz);

}  // namespace cptrace
