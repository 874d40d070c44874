// `cptrace cluster agent`: the node side of a cluster run, started by the
// controller through the node's transport. stdin: the controller's request (one
// JSON line) and commands; stdout: the framed stream of agent_wire.h, nothing
// else.
//
// {"op": "record", "node", "dir", "key", "record_args": [...], "command": [...],
//  "controller_timeout": SEC, "hold": BOOL}
//   writes the key to DIR/minrtt.key (0600, O_EXCL, never through a symlink),
//   runs `cptrace record --no-progress --node NODE --key DIR/minrtt.key -o
//   DIR/trace ARGS -- COMMAND` in its own session (output in DIR/record.log),
//   and streams DIR/trace/events.cpt as it grows, whole frames only (bytes sent
//   never change, even when the writer cuts back a failed write), the rest
//   once the recorder has ended. "stop" on stdin sends the
//   recorder SIGINT; stdin at EOF (the controller gone) for `controller_timeout`
//   seconds does the same, and the trace stays in DIR. At the recorder's end: the
//   rest of events.cpt, meta.json, Done {"status", "events_bytes",
//   "stderr_tail"} (also written to DIR/status.json); the key file is removed.
//   With "hold", the recorder gets `--sync-hold DIR/sync.hold`: once its MinRTT
//   stop phase is over the agent sends Stopped, and the responder keeps
//   answering until "release" on stdin (or the controller's timeout) removes
//   the file.
// {"op": "follow", "dir", "offset"}
//   the stream again after a break, while the recorder runs (its agent, alive or
//   not, sees the controller back through DIR/follower.alive and does not stop
//   it for the controller's absence): events.cpt from `offset` as it grows,
//   "stop" stops the recorder, and at its end the rest, meta.json and Done.
// {"op": "fetch", "dir", "offset", "stop", "wait"}
//   sends DIR/trace/events.cpt from `offset`, meta.json, and Done (from
//   DIR/status.json, or {"running": true} while the recorder still runs). A
//   recorder whose agent is gone is sent SIGINT first with "stop", and its end
//   awaited up to "wait" seconds.
#pragma once

namespace cptrace {

int run_cluster_agent();

}  // namespace cptrace
