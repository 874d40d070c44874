// MinRTT rounds taken without a key (--insecure): the warning `translate` and
// `latency` print, naming the node pairs.
#pragma once
#include <string>
#include <vector>

namespace cptrace {

std::string unauthenticated_warning(const std::vector<std::string>& pairs);

}  // namespace cptrace
