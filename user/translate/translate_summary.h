// What `cptrace translate` tells the user once it has written the trace: the
// events and nodes, each node's path and bound width, the packets matched, each
// pair's inputs, non-linear or unusable pairs, the physics check, the clock
// model's fallbacks, CLOCK_REALTIME offsets and the reference's TSC frequency;
// all read back from the meta.json written (so `cluster` prints the same lines).
#pragma once
#include <string>

#include "translate/translate.h"

namespace cptrace {

// The summary's lines, each ending in a newline.
std::string translate_summary(const TranslateSummary& s, const TranslateOptions& opt);

// The command: translate, then its summary on stdout. 0 (a failure throws).
int run_translate(const TranslateOptions& opt);

}  // namespace cptrace
