// `cptrace export ctf|json|csv DIR -o OUT`.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "analyze/export_csv.h"
#include "analyze/export_ctf.h"
#include "analyze/export_json.h"
#include "cli/commands.h"

namespace cptrace {

namespace {

struct ExportArgs {
  std::string format, dir, out;
  bool overwrite = false;
};

int run_export(const ExportArgs& a) {
  const std::string& format = a.format;
  const std::string& out = a.out;
  if (format != "ctf" && format != "json" && format != "csv")
    throw std::runtime_error("unknown format '" + format + "' (ctf, json or csv)");
  auto r = open_trace(a.dir);
  Timeline tl = trace_timeline(*r);
  // CTF output is a directory: export_ctf() checks it itself.
  if (format != "ctf" && !a.overwrite && std::filesystem::exists(out))
    throw std::runtime_error(out + ": exists (use -f to overwrite)");
  if (format == "ctf") {
    CtfStats s = export_ctf(*r, tl, out, a.overwrite);
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

}  // namespace

SubcommandRunner add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* exp = app.add_subcommand("export", "export a trace: ctf (babeltrace2, Trace Compass), json (Chrome/Perfetto), csv");
  exp->add_option("format", a->format, "ctf, json or csv")->required();
  exp->add_option("dir", a->dir, "trace directory")->required();
  exp->add_option("-o,--output", a->out, "output (a directory for ctf, a file otherwise)")->required();
  exp->add_flag("-f,--force", a->overwrite, "overwrite an existing output");
  return {exp, [a] { return run_export(*a); }};
}

}  // namespace cptrace
