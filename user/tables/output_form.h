// How an analysis command prints its rows: text for people, or one of the two
// forms programs read (--csv, --json). With CSV or JSON on stdout, the notes
// besides the rows go to stderr so that stdout stays parseable.
#pragma once
#include <cstdio>

namespace cptrace {

enum class Output { Text, Csv, Json };

// Where the notes besides the rows go.
inline FILE* notes_stream(Output o) { return o == Output::Text ? stdout : stderr; }

}  // namespace cptrace
