// The three-node pipeline on the namespace testbed (nodes 1..3 = A, B, C):
// tests/pipeline sends tuples A -> B -> C over TCP while each node records with
// MinRTT rounds to the two others (one key shared by the three) and a simulated
// clock of seconds of offset and tens to hundreds of ppm; then `translate` onto
// A. Shared by the end-to-end tests that need real recordings of three machines.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "record_util.h"
#include "test_util.h"
#include "testbed_util.h"

namespace testutil {

struct ThreeNodePipeline {
  std::string dir;  // the recordings go to DIR/A, DIR/B, DIR/C
  std::string key;  // from `cptrace keygen`
  int tuples = 0;  // sent by A
  std::string sync;  // MinRTT options besides --peers and --key
};

// The recorders, started C first (B connects to it, A to B); their stdout and
// stderr in tmp as A.out, A.err, ...
inline std::vector<std::unique_ptr<Proc>> start_three_node_pipeline(const testbed::Testbed& tb, const TempDir& tmp,
                                                                    const ThreeNodePipeline& p) {
  const std::string wl = (build_dir() / "tests" / "pipeline").string();
  const char* names[] = {"A", "B", "C"};
  const char* sims[] = {"1500000000,40", "-2700000000,-150", "900000000,200"};
  const char* peers[] = {"10.77.2.2:7711,10.77.3.2:7711", "10.77.1.2:7711,10.77.3.2:7711",
                         "10.77.1.2:7711,10.77.2.2:7711"};
  const std::string roles[] = {
      "--role A --connect 10.77.2.2:9000 --tuples " + std::to_string(p.tuples) + " --rate 500 --connect-timeout 30",
      "--role B --listen 10.77.2.2:9000 --connect 10.77.3.2:9000 --connect-timeout 30",
      "--role C --listen 10.77.3.2:9000"};
  std::vector<std::unique_ptr<Proc>> rec;
  for (int k = 2; k >= 0; --k)
    rec.push_back(std::make_unique<Proc>(
        "ip netns exec " + tb.ns(k + 1) + " " +
            record_cmd(p.dir + "/" + names[k], std::string("--node ") + names[k] + " --peers " + peers[k] + " --key " +
                                                   p.key + " " + p.sync + " --simulate-clock " + sims[k] + " -- " + wl +
                                                   " " + roles[k]),
        tmp / (std::string(names[k]) + ".out"), tmp / (std::string(names[k]) + ".err")));
  return rec;
}

// `cptrace translate DIR/A DIR/B DIR/C --reference A [options] -o out`.
inline std::string translate_three_nodes(const std::string& dir, const std::string& options, const std::string& out) {
  return cptrace_bin() + " translate " + dir + "/A " + dir + "/B " + dir + "/C --reference A" +
         (options.empty() ? "" : " " + options) + " -o " + out;
}

}  // namespace testutil
