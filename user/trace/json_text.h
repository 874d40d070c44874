// JSON text of what came from outside: channel names a traced program chose, a
// process's comm, a command line. nlohmann::json::dump throws on a string that is
// not UTF-8, which would stop a recorder on a name like "in\xff"; these never do.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cptrace {

// s with every byte that is not part of a well-formed UTF-8 sequence written as
// the four characters \xNN, readable in every output. Valid text comes back
// unchanged.
std::string valid_utf8(std::string_view s);

// j.dump(indent), with any byte that is not UTF-8 left in a string replaced by
// U+FFFD instead of an exception: a last line of defence where a writer may meet
// a string not passed through valid_utf8.
std::string json_text(const nlohmann::json& j, int indent = -1);

}  // namespace cptrace
