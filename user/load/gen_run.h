// `cptrace gen`: tuples at an exact constant rate (generator.h), and with
// --control one round checked by a sink.
#pragma once
#include <string>

#include "load/generator.h"

namespace cptrace {

struct GenRunOptions {
  std::string to, control;
  GenOptions g;
  bool json = false;
};

// Emits the tuples and prints the report (stderr; JSON on stdout with --json).
// 1 on a transport error, 3 when the sink saw a tuple lost or duplicated, 2 when
// not every slot was emitted (stopped early), else 0.
int run_gen(const GenRunOptions& opt);

}  // namespace cptrace
