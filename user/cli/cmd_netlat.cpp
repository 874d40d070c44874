// `cptrace netlat`: its options; the command is run_netlat
// (netlat/netlat_command.h).
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "export/export_netlat.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "tables/output_form.h"
#include "netlat/netlat_command.h"
#include "os/cgroup_dirs.h"

namespace cptrace {

SubcommandRunner add_netlat_command(CLI::App& app) {
  auto o = std::make_shared<NetlatOptions>();
  auto format = std::make_shared<Output>(Output::Text);
  struct Table {
    std::string out;
    bool plain = false, parquet = false, overwrite = false;
  };
  auto table = std::make_shared<Table>();
  struct Owner {
    std::string cgroup, container;
  };
  auto owner = std::make_shared<Owner>();
  const char* what = "one-way delay of every packet matched between recorded nodes (record --net), with bounds";
  auto* cmd = app.add_subcommand("netlat", what);
  add_relation_options(cmd, o->relate);
  cmd->add_option("--from", o->from, "only packets sent by this node");
  cmd->add_option("--to", o->to, "only packets received by this node");
  cmd->add_option("--port", o->port, "only flows with this port at either end")->check(CLI::Range(1, 65535));
  cmd->add_option("--addr", o->addr, "only flows with this IPv4 or IPv6 address at either end");
  cmd->add_option("--pid", o->pid, "only packets sent or received by this process (as the recorder attributed them)");
  auto* cg = cmd->add_option("--cgroup", owner->cgroup,
                             "only packets sent or received by tasks of this cgroup v2: its id as recorded (dump shows "
                             "it) or its directory on this machine");
  cmd->add_option("--container", owner->container,
                  "only packets sent or received by this container (its id, 12 digits or more): its runtime's cgroup "
                  "on this machine")
      ->excludes(cg);
  cmd->add_option("--since", o->since_s,
                  "only packets sent at or after S seconds since the reference's recording start (its clock)");
  cmd->add_option("--until", o->until_s,
                  "only packets sent before S seconds since the reference's recording start (its clock)");
  auto [csv, json] =
      add_output_flags(cmd, *format, "one CSV row per matched packet instead of the summary",
                       "the summary as JSON: per flow and direction, counts and p0..p100 with strict bounds");
  auto* writes = cmd->add_flag("--writes", o->writes,
                               "the application's view instead: each TCP write or UDP datagram, from its send call's "
                               "entry to the recv that returned its last byte");
  auto* out = cmd->add_option("--table", table->out,
                              "write the packets and flows as tables for SQL in this directory (packets.csv.zst, "
                              "flows.csv.zst), instead of the summary");
  out->type_name("DIR")->excludes(csv)->excludes(json)->excludes(writes);
  auto* plain = cmd->add_flag("--plain", table->plain, "--table: uncompressed packets.csv, flows.csv")->needs(out);
  cmd->add_flag("--parquet", table->parquet, "--table: Parquet packets.parquet, flows.parquet")
      ->needs(out)
      ->excludes(plain);
  cmd->add_flag("-f,--force", table->overwrite, "--table: overwrite an existing table export")->needs(out);
  return {
      cmd, [o, format, table, owner] {
        if (!owner->cgroup.empty()) o->cgroup = cgroup_of(owner->cgroup, "--cgroup");
        if (!owner->container.empty()) o->cgroup = container_cgroup(owner->container, "--container");
        if (table->out.empty()) return run_netlat(*o, *format);
        const TableForm form = table->parquet ? TableForm::Parquet : table->plain ? TableForm::Plain : TableForm::Zstd;
        return run_netlat_table(*o, table->out, form, table->overwrite);
      }};
}

}  // namespace cptrace
