// `cptrace translate`'s options: the choices (--method, --clock-model,
// --inputs) with their one spelling on the command line and in meta.json, and
// the checks that need no trace. What each choice means is in translate.h.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace cptrace {

// zstd level 1: what translate wrote before the level could be chosen.
constexpr int kTranslateDefaultLevel = 1;

// --method: which relation of a node pair is used (see above).
enum class Method { Ratio, Hull, Best };
// --clock-model: linear, the methods above (clocks linear over the span, or split
// where hulls cross); piecewise, the rate-bounded relation (drift_bound.h) over
// every round and matched packet, strict whatever the rates do within
// +-max_drift_ppm.
enum class ClockModel { Linear, Piecewise };
// --inputs: which constraints relate a node pair: MinRTT rounds, matched packets
// (traffic), or both. One alone is for comparing what each gives.
enum class Inputs { Both, Rounds, Traffic };

// The one spelling of each value, on the command line and in meta.json "translated".
std::string name_of(Method m);
std::string name_of(ClockModel m);
std::string name_of(Inputs i);
// The value a name spells; anything else throws std::invalid_argument naming
// `what` (the flag, or where in meta.json the name was read), the bad name and
// the names that exist.
Method parse_method(std::string_view s, std::string_view what = "--method");
ClockModel parse_clock_model(std::string_view s, std::string_view what = "--clock-model");
Inputs parse_inputs(std::string_view s, std::string_view what = "--inputs");

struct TranslateOptions {
  std::vector<std::string> dirs;
  std::string reference;  // empty: the only node (an error with several)
  std::string out;
  Method method = Method::Best;
  bool overwrite = false;
  // Translate even when a pair's rounds contradict each other or physics
  // (sync_sanity.h); the findings are then written into meta.json "translated"
  // "suspect_sync" and printed as WARNING lines. Default: refuse.
  bool accept_suspect_sync = false;
  ClockModel clock_model = ClockModel::Linear;
  double max_drift_ppm = 500;
  Inputs inputs = Inputs::Both;
  // --threads: frames translated at once (0: every CPU). The output is the same
  // for any number: frames are independent once the relations are known.
  unsigned threads = 0;
  // --compression-level: the zstd level of the Translated frames (negative:
  // zstd's fast levels, less CPU for larger frames). Readers need not know it:
  // a zstd frame decodes the same whatever level wrote it. Any level other than
  // the default is written into meta.json "translated" "compression_level".
  int compression_level = kTranslateDefaultLevel;
};

// The limits a flag's parser cannot know (the zstd levels this libzstd has) or
// that a caller outside the CLI may break; throws std::runtime_error naming the
// flag and its value.
void check_options(const TranslateOptions& opt);

}  // namespace cptrace
