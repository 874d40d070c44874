// A node's stream into its copy, RUN/NODE: agents started and ended, their
// frames applied to events.cpt and meta.json, and what a broken stream missed
// fetched again by offset.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/node_run.h"

namespace cptrace::cluster {

// Writes `content` to `path` whole (a temporary file, fsync, rename).
void write_file(const std::string& path, const std::string& content);

// Reads what the node's agent sent; false at the end of its stream.
bool read_stream(NodeRun& n);
// Reads the agent's stderr (the transport's messages), keeping its tail.
void read_err(NodeRun& n);

// Starts an agent on the node with `request` (one JSON line on its stdin).
void start_agent(NodeRun& n, const nlohmann::json& request);
// Closes the agent's pipes and reaps it.
void finish_agent(NodeRun& n);
// Runs one agent (a fetch) to its end.
void run_fetch(NodeRun& n);

// Opens RUN/NODE/events.cpt: `fresh` creates the directory, else the copy is
// taken up at its end.
void open_copy(NodeRun& n, bool fresh, bool overwrite);
// After the stream: a node whose copy is short is asked again from where it
// broke; what is still missing is said by name.
void complete_copy(NodeRun& n);

}  // namespace cptrace::cluster
