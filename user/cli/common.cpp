#include "cli/common.h"
#include "tables/output_form.h"

#include <stdexcept>

#include <CLI/CLI.hpp>

#include "tables/memory_budget.h"

#include <exception>

#include <fmt/core.h>

#include "trace/trace_reader.h"

namespace cptrace {

OutputFlags add_output_flags(CLI::App* cmd, Output& out, const std::string& csv_help, const std::string& json_help) {
  auto* csv = cmd->add_flag_callback(
      "--csv", [&out] { out = Output::Csv; }, csv_help);
  auto* json = cmd->add_flag_callback(
                      "--json", [&out] { out = Output::Json; }, json_help)
                   ->excludes(csv);
  return {csv, json};
}

void add_memory_options(CLI::App* cmd, MemoryBudget& b) {
  cmd->add_option_function<std::string>(
         "--memory",
         [&b](const std::string& v) {
           try {
             b.bytes = parse_memory_size("--memory", v);
           } catch (const std::runtime_error& e) {
             throw CLI::ValidationError(e.what());
           }
         },
         "memory for the per-tuple data (default 1G); beyond it, data is spilled to --temp-dir")
      ->type_name("SIZE");
  cmd->add_option("--temp-dir", b.temp_dir,
                  "directory for spilled data (default $TMPDIR or /tmp); the files have no name and vanish at exit")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--threads", b.threads, "threads for the per-tuple work (default: every CPU); same output for any")
      ->type_name("N")
      ->check(CLI::Range(1u, 1024u));
}

CLI::Option* add_pair_option(CLI::App* cmd, std::vector<std::string>& raw, const std::string& help,
                             const std::string& old_name, bool one_value_each) {
  // Both spellings append, so that neither overwrites the other's values.
  auto append = [&raw](const std::vector<std::string>& v) { raw.insert(raw.end(), v.begin(), v.end()); };
  auto* pair = cmd->add_option_function<std::vector<std::string>>("--pair", append, help)->type_name("FROM,TO");
  pair->allow_extra_args(!one_value_each);
  // The empty group: accepted, not listed in --help.
  if (!old_name.empty())
    cmd->add_option_function<std::vector<std::string>>(old_name, append, "FROM,TO: as --pair")
        ->group("")
        ->allow_extra_args(!one_value_each);
  return pair;
}

std::vector<ChannelPair> channel_pairs(const std::vector<std::string>& raw) {
  std::vector<ChannelPair> out;
  for (const std::string& p : raw) {
    size_t comma = p.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == p.size() ||
        p.find(',', comma + 1) != std::string::npos)
      throw std::runtime_error("--pair '" + p + "': expected FROM,TO (two channel names)");
    out.emplace_back(p.substr(0, comma), p.substr(comma + 1));
  }
  return out;
}

}  // namespace cptrace
