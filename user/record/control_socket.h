// The recorder's control socket: a unix stream socket through which
// `cptrace config` changes channel handlers while recording.
//
// One request per connection, one JSON object each way:
//   -> {"cmd":"set","channel":"NAME","handler":["downsample","10"]}
//   -> {"cmd":"get"}
//   <- {"ok":true, ...} or {"ok":false,"error":"what was wrong"}
// The socket is created mode 0600 (the recorder runs as root: only root may
// reconfigure it) and removed when the recording stops.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace cptrace {

class ControlSocket {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  // Binds `path` (a stale socket left by a killed recorder is replaced; a live
  // one is an error) and serves requests on a thread until destroyed.
  ControlSocket(std::string path, Handler handler);
  ~ControlSocket();
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;
  const std::string& path() const { return path_; }
  // Throws what the constructor would for an address that cannot be formed
  // (file name too long, directory missing), so a recorder can refuse a bad
  // --control-socket before it creates its trace directory.
  static void check_address(const std::string& path);

 private:
  void loop();
  void serve(int fd);

  std::string path_;
  Handler handler_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;
};

// Client side: sends one request, returns the reply. Throws std::runtime_error
// naming the socket when it cannot connect or the reply is not JSON.
nlohmann::json control_request(const std::string& path, const nlohmann::json& request, int timeout_ms = 5000);

}  // namespace cptrace
