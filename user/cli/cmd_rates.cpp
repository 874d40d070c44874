// `cptrace rates`: the non-blocking service rate behind a queue, per channel pair
// (analyze/service_rates.cpp).
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "analyze/service_rates.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "tables/output_form.h"

namespace cptrace {

namespace {

struct RatesArgs {
  std::string dir;
  std::vector<std::string> pairs;  // --pair as typed
  RateOptions opt;
  Output output = Output::Text;
};

}  // namespace

SubcommandRunner add_rates_command(CLI::App& app) {
  auto a = std::make_shared<RatesArgs>();
  auto* rates = app.add_subcommand("rates", "non-blocking service rate behind a queue (channel pair)");
  rates->add_option("dir", a->dir, "trace directory")->required();
  add_pair_option(rates, a->pairs, "FROM,TO: enqueue (or in) and dequeue (or out) channels; repeatable",
                  "--channel-pair");
  rates->add_option("--period", a->opt.period_ms, "sampling window T in ms (default 10)");
  // A count: CLI11 would wrap -1 into 2^64 - 1 (no estimate, ever, and no word why).
  rates->add_option("--min-windows", a->opt.min_windows, "non-blocking windows needed for an estimate (default 30)")
      ->check(CLI::Validator(
          [](const std::string& s) {
            return s.find('-') != std::string::npos ? s + " is negative: a count of windows" : "";
          },
          "N"));
  rates->add_option("--quantile", a->opt.quantile, "quantile of the filtered samples (default 0.95)");
  rates->add_option("--tolerance", a->opt.tolerance, "convergence: relative drift allowed (default 0.05)");
  rates->add_option("--sigma", a->opt.sigma, "Gaussian filter width in windows (default 1)");
  add_output_flags(rates, a->output, "CSV output", "JSON output");
  return {rates, [a] { return run_rates({a->dir, channel_pairs(a->pairs), a->opt, a->output}); }};
}

}  // namespace cptrace
