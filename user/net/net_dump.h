// Network events in `cptrace dump` (text and CSV). The CSV appends these columns
// after the user-event ones (which stay first and unchanged); user rows leave them
// empty, net rows leave channel and tuple empty.
#pragma once
#include <cstdio>
#include <string>

#include "trace/net_codec.h"

namespace cptrace {

// ",proto,family,saddr,sport,daddr,dport,seq,ack,len,tcp_flags,ifindex,netns,gso_segs,gso_size,ip_id,hash,mono_ns,flags"
extern const char kNetCsvColumns[];
// As many empty fields as kNetCsvColumns has columns (for user rows).
extern const char kNetCsvEmpty[];
void print_net_csv(FILE* out, const std::string& node, const NetEvent& e);
void print_net_text(FILE* out, const NetEvent& e);

}  // namespace cptrace
