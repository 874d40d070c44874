// Every subcommand of cptrace, registered one way: add_X_command adds X and its
// options to the parser and returns the subcommand with the function that runs
// it. The function owns the parsed options (so they outlive parsing) and returns
// the process exit status; main() calls it when X was the subcommand given.
#pragma once
#include <functional>
#include <utility>

namespace CLI {
class App;
}

namespace cptrace {

struct TranslateOptions;

using SubcommandRunner = std::pair<CLI::App*, std::function<int()>>;

// Recording and looking at one node's trace.
SubcommandRunner add_record_command(CLI::App& app);  // cmd_record.cpp
SubcommandRunner add_dump_command(CLI::App& app);  // cmd_dump.cpp
SubcommandRunner add_info_command(CLI::App& app);  // cmd_info.cpp
SubcommandRunner add_config_command(CLI::App& app);  // cmd_config.cpp
// Analysis and export.
SubcommandRunner add_throughput_command(CLI::App& app);  // cmd_throughput.cpp
SubcommandRunner add_rates_command(CLI::App& app);  // cmd_rates.cpp
SubcommandRunner add_top_command(CLI::App& app);  // cmd_top.cpp
SubcommandRunner add_report_command(CLI::App& app);  // cmd_report.cpp
SubcommandRunner add_export_command(CLI::App& app);  // cmd_export.cpp
SubcommandRunner add_check_command(CLI::App& app);  // cmd_check.cpp
// Several nodes: translation onto one timebase, and the MinRTT commands.
SubcommandRunner add_translate_command(CLI::App& app);  // cmd_translate.cpp
SubcommandRunner add_latency_command(CLI::App& app);  // cmd_latency.cpp
SubcommandRunner add_netlat_command(CLI::App& app);  // cmd_netlat.cpp
SubcommandRunner add_minrttd_command(CLI::App& app);  // cmd_minrttd.cpp
SubcommandRunner add_sync_command(CLI::App& app);  // cmd_sync.cpp
SubcommandRunner add_keygen_command(CLI::App& app);  // cmd_keygen.cpp
SubcommandRunner add_cluster_command(CLI::App& app);  // cmd_cluster.cpp
// The node traces and the choices of their clock relations, as translate and
// netlat both take them (cmd_translate.cpp).
void add_relation_options(CLI::App* cmd, TranslateOptions& opt);
// Load generation and measurement.
SubcommandRunner add_gen_command(CLI::App& app);  // cmd_gen.cpp
SubcommandRunner add_sink_command(CLI::App& app);  // cmd_sink.cpp
SubcommandRunner add_maxrate_command(CLI::App& app);  // cmd_maxrate.cpp
SubcommandRunner add_overhead_command(CLI::App& app);  // cmd_overhead.cpp

}  // namespace cptrace
