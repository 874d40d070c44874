// `cptrace cluster record|gather|agent`: a whole cluster from one command; the
// logic is user/cluster/ (docs/cluster.md).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cluster/agent.h"
#include "cluster/controller.h"

namespace cptrace {

SubcommandRunner add_cluster_command(CLI::App& app) {
  auto rec = std::make_shared<ClusterRecordOptions>();
  auto gat = std::make_shared<ClusterGatherOptions>();
  auto* cluster = app.add_subcommand("cluster",
                                     "record every node of a cluster from one place, over ssh or any "
                                     "transport");
  cluster->require_subcommand(1);

  auto* r = cluster->add_subcommand("record", "start every node's recorder, stream the traces into RUN/, translate");
  r->add_option("nodes", rec->nodes_file, "nodes file (JSON, see docs/cluster.md)")->required();
  r->add_option("-o,--output", rec->out, "run directory to create: RUN/NODE/ per node, RUN/translated")->required();
  r->add_flag("-f,--force", rec->overwrite, "write into an existing run directory");
  r->add_option("--duration", rec->duration_s, "stop every node after SEC seconds")->check(CLI::PositiveNumber);
  r->add_option("--path", rec->path, "channels of a pipeline path A,B,C,...: per-hop summary and RUN/report.html");
  r->add_option("--controller-timeout", rec->controller_timeout_s,
                "seconds an agent waits without its controller before stopping its recorder (default 30)")
      ->check(CLI::PositiveNumber);
  r->add_option("--check-timeout", rec->check_timeout_s, "seconds to reach each node at the start (default 30)")
      ->check(CLI::PositiveNumber);
  r->add_option("--stop-linger", rec->stop_linger_s,
                "seconds every node's MinRTT responder answers after its own stop, for the nodes stopping later "
                "(record --sync-linger; default 3)")
      ->check(CLI::Range(0.0, 3600.0));
  r->add_option("--record-arg", rec->record_args,
                "an option passed to every node's `cptrace record` (repeatable, one word each: "
                "--record-arg=--sync-rounds --record-arg=50)")
      ->allow_extra_args(false);
  auto pass = [rec](const std::string& flag) {
    return [rec, flag](const std::string& v) { rec->record_args.insert(rec->record_args.end(), {flag, v}); };
  };
  r->add_option_function<std::string>("-p,--pid", pass("-p"), "record this pid on every node");
  r->add_option_function<std::string>("--lib", pass("--lib"), "an ELF file to attach to on every node")
      ->allow_extra_args(false);
  r->add_option_function<std::string>("--sync-rounds", pass("--sync-rounds"), "MinRTT rounds per peer (record's)");
  r->add_option_function<std::string>("--sync-wait", pass("--sync-wait"), "wait for a late peer (record's)");
  r->add_flag_callback(
      "--all", [rec] { rec->record_args.push_back("--all"); }, "node-wide recording on every node");
  r->add_flag_callback(
      "--net", [rec] { rec->record_args.push_back("--net"); }, "network events on every node");
  r->add_option("cmd", rec->cmd, "workload of the nodes without their own \"command\" (after --)");

  auto* g = cluster->add_subcommand("gather", "fetch what a cluster run is missing (RUN/cluster.json), translate");
  g->add_option("run", gat->run, "run directory of `cluster record`")->required();
  g->add_flag("!--no-translate", gat->translate, "only fetch");

  cluster->add_subcommand("agent", "the node side, run by the controller through the transport (stdin/stdout)");
  return {cluster, [cluster, r, g, rec, gat] {
            if (*r) return run_cluster_record(*rec);
            if (*g) return run_cluster_gather(*gat);
            return run_cluster_agent();
          }};
}

}  // namespace cptrace
