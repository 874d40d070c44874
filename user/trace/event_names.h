// Names of event kinds as every text output spells them ("user", "close", "count").
#pragma once
#include <cstdint>

#include "trace/trace_format.h"

namespace cptrace {

inline const char* event_kind_name(uint8_t kind) {
  switch (EventKind(kind)) {
    case EventKind::User:
      return "user";
    case EventKind::ChannelClose:
      return "close";
    case EventKind::Count:
      return "count";  // a `counter` handler's period; tuple = events in it
  }
  return "unknown";
}

}  // namespace cptrace
