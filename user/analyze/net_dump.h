// Network events in `cptrace dump` (text and CSV). The CSV appends these columns
// after the user-event ones (which stay first and unchanged); user rows leave them
// empty, net rows leave channel and tuple empty.
#pragma once
#include <cstdio>
#include <string>

#include "trace/net_codec.h"
#include "trace/pid_table.h"

namespace cptrace {

// ",proto,family,saddr,sport,daddr,dport,seq,ack,len,tcp_flags,ifindex,netns,gso_segs,gso_size,ip_id,hash,mono_ns,flags,cgroup"
extern const char kNetCsvColumns[];
// As many empty fields as kNetCsvColumns has columns (for user rows).
extern const char kNetCsvEmpty[];
// `tail`: further CSV fields, each with its leading comma (dump's `nspid`).
void print_net_csv(FILE* out, const std::string& node, const NetEvent& e, const std::string& tail = "");
// `pids`: the trace's namespace pids, shown after the host pid (nullptr: none).
void print_net_text(FILE* out, const NetEvent& e, const PidTable* pids = nullptr);

}  // namespace cptrace
