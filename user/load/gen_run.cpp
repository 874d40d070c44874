// `cptrace gen`: tuples at an exact constant rate (load/generator.cpp), and with
// --control one round checked by a sink.
#include "load/gen_run.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/core.h>

#include "load/generator.h"
#include "load/sink_control.h"
#include "os/stop_signals.h"
#include "os/say.h"

namespace cptrace {

namespace {

void print_gen_report(const GenOptions& g, const GenReport& r, const RoundResult* s) {
  say("{} of {} tuples emitted ({} refused) in {:.3f} s: {:.1f} tuples/s achieved for {:.1f} "
      "requested ({:+.3f}%)\n"
      "  slot lateness: p50 {:.1f} us, p99 {:.1f} us, p99.9 {:.1f} us, max {:.1f} us; blocked by the transport "
      "{:.3f} s",
      r.emitted, r.scheduled, r.send_errors, r.elapsed_s, r.achieved_rate, g.rate, 100 * (r.achieved_rate / g.rate - 1),
      r.lateness.quantile(0.5) / 1e3, r.lateness.quantile(0.99) / 1e3, r.lateness.quantile(0.999) / 1e3,
      r.lateness.max() / 1e3, r.blocked_s);
  if (!r.error.empty()) fmt::print(stderr, "  error: {}\n", r.error);
  if (s)
    fmt::print(stderr, "  sink: {} unique of {} emitted, {} lost, {} duplicates, intake {:.1f}/s, drain {:.3f} s\n",
               s->unique, s->emitted, s->lost, s->duplicates, s->intake_rate, s->drain_s);
}

}  // namespace

int run_gen(const GenRunOptions& opt) {
  GenRunOptions c = opt;  // the endpoint is parsed into its copy of the generator options
  c.g.to = parse_endpoint(c.to, "--to");
  validate(c.g);
  std::unique_ptr<SinkControl> ctl;
  uint64_t n = slot_count(c.g.rate, c.g.duration_s);
  if (!c.control.empty()) {
    ctl = std::make_unique<SinkControl>(parse_endpoint(c.control, "--control"));
    ctl->begin(c.g.first_id, n, c.g.rate, c.g.duration_s);
  }
  std::atomic<bool> stop{false};
  StopSignals signals(&stop);  // a second signal, during the report, is noted too
  GenReport r = run_generator(c.g, &stop);
  std::optional<RoundResult> s;
  if (ctl) s = ctl->end(r.emitted);
  if (c.json) {
    auto j = r.to_json();
    j["rate"] = c.g.rate;
    if (s) j["sink"] = s->to_json();
    fmt::print("{}\n", j.dump(2));
  }
  print_gen_report(c.g, r, s ? &*s : nullptr);
  if (!r.error.empty()) return 1;
  if (s && (s->lost || s->duplicates)) return 3;
  return r.emitted == r.scheduled ? 0 : 2;
}

}  // namespace cptrace
