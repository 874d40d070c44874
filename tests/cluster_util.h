// Shared by the `cptrace cluster` tests: the testbed address of a node, an sshd
// started inside a node's namespace with a test host key and user key, and the
// ssh transport that reaches it (real OpenSSH, the client in another node's
// namespace because the testbed's addresses exist only there).
#pragma once
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "testbed_util.h"

namespace cluster_test {

inline std::string ip(int k) { return "10.77." + std::to_string(k) + ".2"; }

// sshd in node k's namespace, allowing root with the test user key only.
struct Sshd {
  std::unique_ptr<testutil::Proc> proc;
  Sshd(const testutil::TempDir& tmp, const std::string& ns, int k) {
    std::string d = tmp / "ssh", conf = d + "/sshd" + std::to_string(k) + ".conf";
    std::ofstream(conf) << "ListenAddress " << ip(k) << "\nPort 22\nHostKey " << d << "/host_key\n"
                        << "AuthorizedKeysFile " << d << "/authorized_keys\nPermitRootLogin prohibit-password\n"
                        << "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                        << "PidFile none\n";
    proc = std::make_unique<testutil::Proc>("ip netns exec " + ns + " /usr/sbin/sshd -D -e -f " + conf,
                                            d + "/sshd" + std::to_string(k) + ".out",
                                            d + "/sshd" + std::to_string(k) + ".err");
  }
};

// The ssh transport of node k: the client runs in node 1's namespace (the
// testbed's addresses exist only there), a real OpenSSH connection to node k.
inline std::vector<std::string> ssh_transport(const testutil::TempDir& tmp, const std::string& client_ns, int k) {
  std::string d = tmp / "ssh";
  return {"ip",
          "netns",
          "exec",
          client_ns,
          "ssh",
          "-i",
          d + "/user_key",
          "-o",
          "StrictHostKeyChecking=no",
          "-o",
          "UserKnownHostsFile=" + d + "/known_hosts",
          "-o",
          "BatchMode=yes",
          "-o",
          "LogLevel=ERROR",
          "root@" + ip(k)};
}

// TMP/ssh with a host key, a user key and its authorized_keys; "" or what failed.
inline std::string make_ssh_keys(const testutil::TempDir& tmp) {
  std::filesystem::create_directories(tmp / "ssh");
  mkdir("/run/sshd", 0755);  // sshd's privilege separation directory
  for (const char* k : {"host_key", "user_key"}) {
    auto r = testutil::run("ssh-keygen -q -t ed25519 -N '' -f " + (tmp / ("ssh/" + std::string(k))), tmp);
    if (r.status != 0) return r.err;
  }
  std::filesystem::copy_file(tmp / "ssh/user_key.pub", tmp / "ssh/authorized_keys");
  return "";
}

// sshd listens once its namespace's address is up: a command over ssh shows it.
inline bool ssh_answers(const testutil::TempDir& tmp, const std::string& client_ns, int k) {
  std::string cmd;
  for (const auto& w : ssh_transport(tmp, client_ns, k)) cmd += testbed::shq(w) + " ";
  for (int i = 0; i < 100; ++i) {
    if (testutil::run(cmd + "true", tmp).status == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace cluster_test
