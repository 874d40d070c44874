// Helpers of the `cptrace cluster` tests on the namespace testbed: node k's
// address, an sshd started inside a node's namespace (a test host key, root
// allowed with the test user key only) and the OpenSSH transport reaching it.
#pragma once
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"
#include "translate/translated_frame.h"

namespace cptrace::clustertest {

inline std::string ip(int k) { return "10.77." + std::to_string(k) + ".2"; }

// The test's host key and user key in DIR/ssh (authorized for root); "" or ssh-keygen's error.
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

// sshd listens once its namespace's address is up: true when `ssh ... true` works.
inline bool wait_ssh_up(const testutil::TempDir& tmp, const std::string& client_ns, int k) {
  std::string cmd;
  for (const auto& w : ssh_transport(tmp, client_ns, k)) cmd += testbed::shq(w) + " ";
  for (int i = 0; i < 100; ++i) {
    if (testutil::run(cmd + "true", tmp).status == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Polls f every 50 ms until it holds (true) or timeout_s passes (false).
inline bool wait_until(const std::function<bool()>& f, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!f()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// The node-local TSC stamp of every event of `channels` in the translated trace
// DIR, by (channel, tuple): the truth side of the containment checks.
inline std::map<std::pair<uint64_t, uint64_t>, uint64_t> local_stamps(const std::string& dir,
                                                                      const std::set<uint64_t>& channels) {
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> local;
  std::vector<TranslatedEvent> evs;
  TraceReader(dir).for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs)
      if (channels.count(e.channel)) local[{e.channel, e.tuple}] = e.local_ts;
  });
  return local;
}

}  // namespace cptrace::clustertest
