// The warning for MinRTT rounds taken without a key.
#include "translate/unauthenticated_rounds.h"

namespace cptrace {

std::string unauthenticated_warning(const std::vector<std::string>& pairs) {
  std::string list;
  for (const std::string& p : pairs) list += (list.empty() ? "" : ", ") + p;
  return "WARNING: unauthenticated MinRTT rounds (no --key): " + list +
         "; anyone on their network could have forged them, and the bounds rest on them";
}

}  // namespace cptrace
