// The nodes file, the O(N) rounds topology and the agent's framed stream
// (user/cluster/): parsing, errors that name the node, quoting for ssh, frames
// decoded whatever the chunking.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "cluster/agent_wire.h"
#include "cluster/nodes_file.h"

namespace cptrace {
namespace {

std::string error_of(const nlohmann::json& j) {
  try {
    parse_nodes(j);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ClusterNodes, HostMeansSshAndItsAddress) {
  ClusterSpec s = parse_nodes(nlohmann::json::parse(R"({"cptrace": "/opt/cptrace", "nodes": [
      {"name": "a", "host": "h1.example"},
      {"name": "b", "transport": "ip netns exec ns2", "minrtt": "10.0.0.2:7000", "command": "prog --x 1"},
      {"name": "c", "transport": ["kubectl", "exec", "-i", "pod", "--"], "minrtt": "fd00::3", "cptrace": "cptrace"},
      {"name": "d", "transport": "ssh -p 2222 root@h4", "minrtt": "[fd00::4]:7001"}]})"));
  ASSERT_EQ(s.nodes.size(), 4u);
  EXPECT_EQ(s.nodes[0].transport, (std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "h1.example"}));
  EXPECT_TRUE(s.nodes[0].shell_transport);
  EXPECT_EQ(s.nodes[0].minrtt, "h1.example:7711");
  EXPECT_EQ(s.nodes[0].cptrace, "/opt/cptrace");
  EXPECT_EQ(s.nodes[1].transport, (std::vector<std::string>{"ip", "netns", "exec", "ns2"}));
  EXPECT_FALSE(s.nodes[1].shell_transport);
  EXPECT_EQ(s.nodes[1].minrtt, "10.0.0.2:7000");
  EXPECT_EQ(s.nodes[1].command, (std::vector<std::string>{"prog", "--x", "1"}));
  EXPECT_EQ(s.nodes[2].minrtt, "[fd00::3]:7711");
  EXPECT_EQ(s.nodes[2].cptrace, "cptrace");
  EXPECT_EQ(s.nodes[3].minrtt, "[fd00::4]:7001");
  EXPECT_TRUE(s.nodes[3].shell_transport);
}

TEST(ClusterNodes, ErrorsNameTheNode) {
  EXPECT_NE(error_of({{"nodes", {{{"name", "x"}}}}}).find("node x: give \"host\""), std::string::npos);
  EXPECT_NE(error_of({{"nodes", {{{"name", "x"}, {"transport", "env"}}}}}).find("node x: \"minrtt\""),
            std::string::npos);
  EXPECT_NE(error_of({{"nodes", {{{"name", "x"}, {"host", "h"}}, {{"name", "x"}, {"host", "g"}}}}})
                .find("node x: named twice"),
            std::string::npos);
  EXPECT_NE(error_of({{"nodes", {{{"name", "../up"}, {"host", "h"}}}}}).find("node #1: name"), std::string::npos);
  EXPECT_NE(error_of({{"nodes", nlohmann::json::array()}}).find("non-empty"), std::string::npos);
}

// Fields of the wrong type are named, not reported as a json library error.
TEST(ClusterNodes, WrongTypesAreNamed) {
  EXPECT_EQ(error_of({{"nodes", {7}}}), "nodes file: node 0 is not an object");
  EXPECT_EQ(error_of({{"nodes", {{{"name", 5}, {"host", "h"}}}}}), "node 0: \"name\" must be a string");
  EXPECT_EQ(error_of({{"nodes", {{{"name", "x"}, {"host", true}}}}}), "node x: \"host\" must be a string");
  EXPECT_EQ(error_of({{"nodes", {{{"name", "x"}, {"host", "h"}, {"shell", "yes"}}}}}),
            "node x: \"shell\" must be true or false");
  EXPECT_EQ(error_of({{"dir", 1}, {"nodes", {{{"name", "x"}, {"host", "h"}}}}}),
            "nodes file: \"dir\" must be a string");
}

TEST(ClusterNodes, SshGetsEveryWordQuoted) {
  ClusterNode n;
  n.transport = {"ssh", "h"};
  n.shell_transport = true;
  n.cptrace = "/opt/my cptrace";
  EXPECT_EQ(remote_argv(n, {"cluster", "it's"}),
            (std::vector<std::string>{"ssh", "h", "'/opt/my cptrace'", "'cluster'", "'it'\\''s'"}));
  n.shell_transport = false;
  EXPECT_EQ(remote_argv(n, {"--version"}), (std::vector<std::string>{"ssh", "h", "/opt/my cptrace", "--version"}));
}

TEST(ClusterNodes, RoundsTopologyIsLinearAndConnected) {
  for (size_t n : {1u, 2u, 3u, 8u, 64u}) {
    std::set<std::pair<size_t, size_t>> pairs;
    for (size_t i = 0; i < n; ++i) {
      auto peers = rounds_peers(i);
      EXPECT_LE(peers.size(), 2u);
      for (size_t p : peers) {
        EXPECT_LT(p, i) << "a node rounds only with earlier ones, so all are up before the later ones";
        pairs.insert({p, i});
      }
      if (i > 0) {
        EXPECT_EQ(peers.front(), 0u) << "every node reaches the reference in one hop";
      }
    }
    EXPECT_EQ(pairs.size(), n < 2 ? 0 : 2 * n - 3) << n;
  }
}

TEST(ClusterWire, FramesSurviveAnyChunking) {
  std::string stream = encode_wire(WireType::Hello, 0, "{}", 2) + encode_wire(WireType::Events, 16, "abcdef", 6) +
                       encode_wire(WireType::Stopped, 0, "{}", 2) + encode_wire(WireType::Done, 0, "", 0);
  for (size_t chunk : {1u, 5u, 24u, 1000u}) {
    WireDecoder d;
    std::vector<WireFrame> got;
    for (size_t at = 0; at < stream.size(); at += chunk) {
      d.feed(stream.data() + at, std::min(chunk, stream.size() - at));
      WireFrame f;
      while (d.next(f)) got.push_back(f);
    }
    ASSERT_EQ(got.size(), 4u) << chunk;
    EXPECT_EQ(got[1].type, WireType::Events);
    EXPECT_EQ(got[1].offset, 16u);
    EXPECT_EQ(got[1].data, "abcdef");
    EXPECT_EQ(got[2].type, WireType::Stopped);
    EXPECT_EQ(got[3].type, WireType::Done);
    EXPECT_EQ(d.pending(), 0u);
  }
}

TEST(ClusterWire, NotAnAgentIsRefused) {
  WireDecoder d;
  std::string s = "bash: cptrace: command not found\n";
  d.feed(s.data(), s.size());
  WireFrame f;
  EXPECT_THROW(d.next(f), std::runtime_error);
}

// The controller's request line, as the agent reads it: every field it uses of
// its type, a refusal naming the field, and what the agent then acts on.
TEST(ClusterWire, AgentRequestIsCheckedBeforeUse) {
  AgentRequest r =
      parse_agent_request(R"({"op":"record","dir":"/var/tmp/run/n1","node":"n1","key":"abc","record_args":["--net"],)"
                          R"("command":["./app","-x"],"controller_timeout":5,"hold":true})");
  EXPECT_EQ(r.op, "record");
  EXPECT_EQ(r.dir, "/var/tmp/run/n1");
  EXPECT_EQ(r.node, "n1");
  EXPECT_EQ(r.key.value_or(""), "abc");
  EXPECT_EQ(r.record_args, std::vector<std::string>{"--net"});
  EXPECT_EQ(r.command, (std::vector<std::string>{"./app", "-x"}));
  EXPECT_EQ(r.controller_timeout, 5);
  EXPECT_TRUE(r.hold);
  AgentRequest f = parse_agent_request(R"({"op":"fetch","dir":"d","offset":4096,"stop":true,"wait":60})");
  EXPECT_EQ(f.offset, 4096u);
  EXPECT_TRUE(f.stop);
  EXPECT_EQ(f.wait, 60);
  struct Case {
    const char *line, *needle;
  } bad[] = {
      {"not json", "request: not a JSON object"},
      {R"({"op":"delete","dir":"d"})", "unknown op \"delete\""},
      {R"({"op":"fetch"})", "\"dir\" must be given"},
      {R"({"op":"fetch","dir":"a\u0000b"})", "\"dir\" must be a string without NUL bytes"},
      {R"({"op":"fetch","dir":"d","offset":-1})", "\"offset\" must be a byte offset"},
      {R"({"op":"fetch","dir":"d","wait":"60"})", "\"wait\" must be a non-negative number"},
      {R"({"op":"record","dir":"d"})", "\"node\" must be given"},
      {R"({"op":"record","dir":"d","node":"n","key":"a\nb"})", "\"key\" must be one line"},
      {R"({"op":"record","dir":"d","node":"n","command":"./app"})", "\"command\" must be an array of strings"},
      {R"({"op":"record","dir":"d","node":"n","controller_timeout":-3})", "\"controller_timeout\" must be"},
      {R"({"op":"record","dir":"d","node":"n","hold":1})", "\"hold\" must be true or false"},
  };
  for (const Case& c : bad) {
    try {
      parse_agent_request(c.line);
      ADD_FAILURE() << c.line << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << c.line << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace cptrace
