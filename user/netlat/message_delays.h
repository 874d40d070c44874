// The application's view of UDP: for every datagram a send call handed to a
// socket, the time from the entry of that call on the sender to the return of
// the recv call on the receiver that delivered it (the kernel's stamp as the
// bytes were copied out), on the reference clock with a strict bound.
//
// A receiving socket's event does not say which datagram it returned, and its
// arrival order is not evidence (datagrams reorder and drop), so the identity
// comes from the bytes: with `record --net-send-calls` the recorder hashes the
// first bytes of each UDP message in the caller's buffer (CP_NETF_MSG_HASH), as
// it hashes a packet's payload. A datagram is measured only where that hash
// names one message and one delivery without doubt: one send of it to that
// destination on every recorded node, one recv of it on the receiving port, and
// no packet of it received there from another flow. The rest is counted
// (unidentified), never guessed: repeated payloads, a caller's buffer that
// could not be read, a message split over more than 4 iovecs in its first bytes.
#pragma once
#include <functional>

#include "netlat/write_delays.h"

namespace cptrace {

// The datagrams of UDP flow `f` from node tx to node rx, each passed to `each`
// once its recv is found (counts as for TCP writes, plus `unidentified`).
WriteCounts match_messages(const FlowId& f, uint32_t tx, uint32_t rx, const std::vector<SocketEvents>& ev,
                           PacketDelays& bounds, const std::function<void(const WriteDelay&)>& each);

}  // namespace cptrace
