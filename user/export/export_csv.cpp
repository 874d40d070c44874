// CSV export, one frame of events at a time.
#include "export/export_csv.h"

#include <cmath>

#include <fmt/format.h>

#include "tables/csv_util.h"
#include "trace/event_names.h"
#include "os/out_file.h"

namespace cptrace {

uint64_t export_csv(const TraceReader& r, const Timeline& tl, const std::string& out) {
  OutFile f(out);
  // A last column `nspid` (the pid inside its container) only when a process
  // ran in one: the columns of other traces stay as they were.
  const PidTable& pids = r.pids();
  const bool nspid = pids.any_container();
  f.write(nspid ? "node,kind,ts,time_ns,channel,channel_id,tuple,pid,tid,cpu,nspid\n"
                : "node,kind,ts,time_ns,channel,channel_id,tuple,pid,tid,cpu\n");
  const std::string node = csv_field(r.trace_meta().node);
  std::string buf;
  uint64_t n = 0;
  r.for_each_batch([&](const std::vector<TraceEvent>& evs) {
    buf.clear();
    for (const TraceEvent& e : evs) {
      long long ns = std::llround(double(int64_t(e.ts - tl.origin)) * 1e9 / tl.hz);
      fmt::format_to(std::back_inserter(buf), "{},{},{},{},{},0x{:016x},{},{},{},{}", node, event_kind_name(e.kind),
                     e.ts, ns, csv_field(r.channel_name(e.channel)), e.channel, e.tuple, e.pid, e.tid, e.cpu);
      if (nspid) fmt::format_to(std::back_inserter(buf), ",{}", pids.csv_field(e.pid));
      buf += '\n';
    }
    f.write(buf);
    n += evs.size();
  });
  f.close();
  return n;
}

}  // namespace cptrace
