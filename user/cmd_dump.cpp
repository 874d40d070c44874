// `cptrace dump`: every event of a trace as text or CSV, in file order (per CPU
// ring and block, so only roughly in time order; sort on ts for a timeline).
#include <cstdio>

#include "commands.h"
#include "trace_reader.h"

namespace cptrace {

const char* kind_name(uint8_t kind) {
  switch (EventKind(kind)) {
    case EventKind::User: return "user";
    case EventKind::ChannelClose: return "close";
    case EventKind::Count: return "count";  // tuple column: events in the period
  }
  return "unknown";
}

int cmd_dump(const std::string& dir, bool csv) {
  TraceReader r(dir);
  std::string node = r.meta().value("node", "");
  if (csv) printf("node,kind,ts,channel,tuple,pid,tid,cpu\n");
  if (!csv) print_handler_history(r, stdout, "# ");
  r.for_each_event([&](const TraceEvent& e) {
    const std::string ch = r.channel_name(e.channel);
    if (csv)
      printf("%s,%s,%llu,%s,%llu,%u,%u,%u\n", node.c_str(), kind_name(e.kind),
             (unsigned long long)e.ts, ch.c_str(), (unsigned long long)e.tuple, e.pid, e.tid, e.cpu);
    else
      printf("%20llu %-6s %-24s tuple=%-20llu pid=%-7u tid=%-7u cpu=%u\n", (unsigned long long)e.ts,
             kind_name(e.kind), ch.c_str(), (unsigned long long)e.tuple, e.pid, e.tid, e.cpu);
  });
  if (r.error()) {
    fflush(stdout);
    fprintf(stderr, "cptrace dump: %s (events before it were printed)\n", r.error()->what());
    return 2;
  }
  return 0;
}

}  // namespace cptrace
