// Whole messages on a blocking stream socket: the control socket, the load
// generator's sink and its control connection all send this one way.
#pragma once
#include <string_view>

namespace cptrace {

// Sends every byte (retrying short sends and EINTR); false on a closed peer or
// an error. MSG_NOSIGNAL: a peer that went away is a false return, never a
// SIGPIPE that would end the recorder.
bool send_all(int fd, std::string_view bytes);

}  // namespace cptrace
