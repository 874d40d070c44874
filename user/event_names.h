// Names of event kinds as every text output spells them ("user", "close").
#pragma once
#include <cstdint>

#include "trace_format.h"

namespace cptrace {

inline const char* event_kind_name(uint8_t kind) {
  switch (EventKind(kind)) {
    case EventKind::User: return "user";
    case EventKind::ChannelClose: return "close";
  }
  return "unknown";
}

}  // namespace cptrace
