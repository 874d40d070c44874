// `cptrace export ctf|json|csv DIR -o OUT`.
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "cli/analysis_commands.h"
#include "analyze/export_csv.h"
#include "analyze/export_ctf.h"
#include "analyze/export_json.h"

namespace cptrace {

int cmd_export(const std::string& format, const std::string& dir, const std::string& out, bool overwrite) {
  if (format != "ctf" && format != "json" && format != "csv")
    throw std::runtime_error("unknown format '" + format + "' (ctf, json or csv)");
  auto r = open_trace(dir);
  Timeline tl = trace_timeline(*r);
  if (format != "ctf" && !overwrite && std::filesystem::exists(out))
    throw std::runtime_error(out + ": exists (use -f to overwrite)");
  if (format == "ctf") {
    CtfStats s = export_ctf(*r, tl, out, overwrite);
    fprintf(stderr, "cptrace export: %llu events in %zu stream(s) (%zu for late events), %llu packets -> %s\n",
            (unsigned long long)s.events, s.streams, s.late_streams, (unsigned long long)s.packets, out.c_str());
  } else {
    uint64_t n = format == "json" ? export_json(*r, tl, out) : export_csv(*r, tl, out);
    fprintf(stderr, "cptrace export: %llu events -> %s\n", (unsigned long long)n, out.c_str());
  }
  if (r->error()) {
    fprintf(stderr, "cptrace export: %s (the export holds the events before it)\n", r->error()->what());
    return 2;
  }
  return 0;
}

}  // namespace cptrace
