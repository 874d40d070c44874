// Handler changes as text: `config set` prints the recorder's reply this way,
// `dump` and `info` a trace's history. In trace/ because both the recording
// side (config) and analysis (info) print them.
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace cptrace {

class TraceReader;

// One handler change (an entry of the trace's or the recorder's change list) as
// one line.
std::string handler_change_line(const nlohmann::json& change);
// One line per handler change of the trace, each starting with `prefix`.
void print_handler_history(const TraceReader& r, FILE* out, const char* prefix);

}  // namespace cptrace
