// `cptrace netlat` end to end on the namespace testbed: two nodes on simulated
// clocks (A +20 ppm, B +50 ppm, offsets of seconds) record `--net` with MinRTT
// rounds while A sends B 2 000 UDP datagrams over IPv4 and 500 over IPv6, and the pipeline workload echoes
// tuples over TCP both ways through a 100 us link (B's side 150 us more).
// Every matched packet's one-way delay bound must contain its truth: every
// namespace shares one CLOCK_MONOTONIC, and each record keeps the kernel's own
// reading (mono_ns), so the true delay of a tx -> rx pair is rx.mono - tx.mono
// (ns) and, on A's TSC, the two readings through A's correlation stream.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "os/cgroup_dirs.h"
#include "tables/rank_select.h"
#include "test_util.h"
#include "testbed_util.h"
#include "trace/trace_reader.h"
#include "truth_util.h"

namespace cptrace {
namespace {

using testbed::skip_reason;
using testbed::Testbed;

struct Row {
  std::string from, to, proto, saddr;
  uint64_t tx_mono = 0, rx_mono = 0;
  int64_t ticks = 0, ticks_lo = 0, ticks_hi = 0, ns = 0, ns_lo = 0, ns_hi = 0;
  bool guaranteed = false;
};

std::vector<Row> parse_csv(const std::string& text) {
  std::vector<Row> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("from_node,to_node,proto,", 0), 0u) << line;
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::stringstream ls(line);
    for (std::string f; std::getline(ls, f, ',');) c.push_back(f);
    if (c.size() != 20) {
      ADD_FAILURE() << "bad row: " << line;
      continue;
    }
    Row r{c[0],
          c[1],
          c[2],
          c[3],
          std::stoull(c[11]),
          std::stoull(c[12]),
          std::stoll(c[13]),
          std::stoll(c[14]),
          std::stoll(c[15]),
          std::stoll(c[16]),
          std::stoll(c[17]),
          std::stoll(c[18]),
          c[19] == "true"};
    rows.push_back(r);
  }
  return rows;
}

// One line of a NETLOAD_STAMPS file: the send or receive call that moved
// datagram `index`, CLOCK_MONOTONIC ns around it (tests/workloads/netload.cpp).
struct CallStamp {
  long index = -1;
  uint64_t before = 0, after = 0;
};

std::vector<CallStamp> read_call_stamps(const std::string& path) {
  std::vector<CallStamp> calls;
  std::istringstream in(testutil::read_file(path));
  for (CallStamp c; in >> c.index >> c.before >> c.after;) calls.push_back(c);
  return calls;
}

// The datagram of the call (one thread's, so in order and apart) whose span
// holds kernel stamp t, or -1.
long datagram_at(const std::vector<CallStamp>& calls, uint64_t t) {
  auto it =
      std::upper_bound(calls.begin(), calls.end(), t, [](uint64_t v, const CallStamp& c) { return v < c.before; });
  if (it == calls.begin() || t > std::prev(it)->after) return -1;
  return std::prev(it)->index;
}

// A cgroup v2 directory for the test, removed at its end (its processes gone by then).
struct CgroupDir {
  std::string path;
  bool ok;
  explicit CgroupDir(std::string p) : path(std::move(p)), ok(mkdir(path.c_str(), 0755) == 0) {}
  ~CgroupDir() {
    if (ok) rmdir(path.c_str());
  }
  bool made() const { return ok; }
};

// netlat --cgroup DIR, --cgroup ID and --container ID: the IPv4 datagrams' flow
// alone (its client was alone in that cgroup), every packet of it matched as
// without the filter; its records carry the cgroup's id, the others do not.
void expect_cgroup_filters(const testutil::TempDir& tmp, const std::string& dir, const std::string& container) {
  const std::string bin = testutil::cptrace_bin(), ab = " " + (tmp / "A") + " " + (tmp / "B") + " --reference A --json";
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  auto all = testutil::run(bin + " netlat" + ab, tmp);
  ASSERT_EQ(all.status, 0) << all.err;
  nlohmann::json udp4;
  const nlohmann::json unfiltered = nlohmann::json::parse(all.out);
  for (const auto& f : unfiltered["flows"])
    if (f["flow"].get<std::string>().find("-> 10.77.2.2:9100") != std::string::npos) udp4 = f;
  ASSERT_FALSE(udp4.is_null()) << all.out;
  nlohmann::json first;
  for (const std::string& filter :
       {" --cgroup " + dir, " --cgroup " + std::to_string(st.st_ino), " --container " + container.substr(0, 12)}) {
    auto r = testutil::run(bin + " netlat" + ab + filter, tmp);
    ASSERT_EQ(r.status, 0) << filter << ": " << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["flows"].size(), 1u) << filter << ": " << r.out;
    const nlohmann::json& f = j["flows"][0];
    EXPECT_EQ(f["flow"], udp4["flow"]) << filter;
    EXPECT_EQ(f["sent"], udp4["sent"]) << filter;
    EXPECT_EQ(f["matched"], udp4["matched"]) << filter;
    EXPECT_EQ(f["delay_ns"], udp4["delay_ns"]) << filter;
    if (first.is_null()) first = j;
    EXPECT_EQ(j, first) << filter << ": the three name one cgroup";
  }
  auto none = testutil::run(bin + " netlat" + ab + " --container " + std::string(64, 'f'), tmp);
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("--container " + std::string(64, 'f') + ": no cgroup of that container"), std::string::npos)
      << none.err;
  auto bad = testutil::run(bin + " netlat" + ab + " --cgroup /tmp", tmp);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--cgroup /tmp: not a cgroup v2 directory"), std::string::npos) << bad.err;
  // dump shows each record's cgroup: the client's datagrams carry the directory's id.
  auto dump = testutil::run(bin + " dump " + (tmp / "A") + " --csv", tmp);
  ASSERT_EQ(dump.status, 0) << dump.err;
  auto fields = [](const std::string& line) {
    std::vector<std::string> c;
    std::stringstream ls(line);
    for (std::string f; std::getline(ls, f, ',');) c.push_back(f);
    return c;
  };
  std::istringstream in(dump.out);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> head = fields(line);
  auto col = [&](const char* name) { return size_t(std::find(head.begin(), head.end(), name) - head.begin()); };
  const size_t kind = col("kind"), dport = col("dport"), cgroup = col("cgroup");
  ASSERT_LT(cgroup, head.size()) << line;
  size_t tagged = 0, other = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> c = fields(line);
    if (c.size() <= cgroup || c[kind] != "tx") continue;
    const bool mine = c[cgroup] == std::to_string(st.st_ino);
    (c[dport] == "9100" ? tagged : other) += mine;
  }
  EXPECT_EQ(tagged, udp4["sent"].get<size_t>()) << "every datagram's transmit carries the client's cgroup";
  EXPECT_EQ(other, 0u) << "no other transmit does";
}

// `top RUN --flows` while the nodes recorded: refreshes of an incomplete run
// that matched packets, every percentile shown inside its bound, counts that
// only grow.
void expect_live_flows(const std::string& out) {
  std::istringstream lines(out);
  size_t live = 0, refreshes = 0;
  std::map<std::string, uint64_t> matched;
  for (std::string l; std::getline(lines, l);) {
    if (l.empty()) continue;
    const nlohmann::json r = nlohmann::json::parse(l);
    refreshes++;
    uint64_t seen = 0;
    for (const auto& f : r.value("flows", nlohmann::json::array())) {
      const std::string k = f["flow"].get<std::string>() + " " + f["from"].get<std::string>();
      EXPECT_GE(f["matched"].get<uint64_t>(), matched[k]) << k << ": fewer packets than a refresh before";
      matched[k] = f["matched"].get<uint64_t>(), seen += matched[k];
      for (const char* q : {"p50", "p99", "max"})
        if (f.contains(q)) {
          EXPECT_LE(f[q]["ticks_lo"].get<int64_t>(), f[q]["ticks"].get<int64_t>()) << k << " " << q;
          EXPECT_LE(f[q]["ticks"].get<int64_t>(), f[q]["ticks_hi"].get<int64_t>()) << k << " " << q;
        }
    }
    live += !r.value("complete", false) && seen > 0;
  }
  EXPECT_GE(live, 1u) << "no refresh matched packets while the nodes recorded (" << refreshes << " refreshes)";
  printf("  [top --flows] %zu refreshes, %zu while recording with matched packets\n", refreshes, live);
}

// `top RUN --flows` on the finished run: its refresh is netlat under the same
// clock model (the drift-bounded rounds top relates nodes with), every flow's
// count and p50/p99/max with their bounds, tick for tick.
void expect_top_flows(const testutil::TempDir& tmp) {
  const std::string bin = testutil::cptrace_bin(), run = tmp / "top-run";
  // A run directory of the two nodes alone (the test's directory holds copies too).
  std::filesystem::create_directories(run);
  for (const char* n : {"A", "B"})
    std::filesystem::copy(tmp / n, run + "/" + n, std::filesystem::copy_options::recursive);
  auto top = testutil::run(bin + " top " + run + " --flows --json --reference A --wait 0", tmp);
  ASSERT_EQ(top.status, 0) << top.err;
  std::string last;  // one JSON object per refresh, one per line
  std::istringstream lines(top.out);
  for (std::string l; std::getline(lines, l);)
    if (!l.empty()) last = l;
  const nlohmann::json refresh = nlohmann::json::parse(last);
  ASSERT_TRUE(refresh.value("complete", false)) << last.substr(0, 400);
  auto csv = testutil::run(bin + " netlat " + (tmp / "A") + " " + (tmp / "B") +
                               " --reference A --clock-model piecewise --inputs rounds --csv",
                           tmp);
  ASSERT_EQ(csv.status, 0) << csv.err;
  std::map<std::string, std::array<std::vector<int64_t>, 3>> by_flow;  // est, lo, hi
  for (const Row& r : parse_csv(csv.out)) {
    if (!r.guaranteed) continue;
    auto& v = by_flow[r.proto + (r.saddr.find(':') != std::string::npos ? "6 " : "4 ") + r.from + "->" + r.to];
    v[0].push_back(r.ticks), v[1].push_back(r.ticks_lo), v[2].push_back(r.ticks_hi);
  }
  size_t flows = 0;
  for (const auto& f : refresh["flows"]) {
    const std::string text = f["flow"].get<std::string>();
    const std::string k = text.substr(0, 3) + (text.find("fd77") != std::string::npos ? "6 " : "4 ") +
                          f["from"].get<std::string>() + "->" + f["to"].get<std::string>();
    auto it = by_flow.find(k);
    ASSERT_NE(it, by_flow.end()) << "top shows a flow netlat does not: " << text;
    auto& [est, lo, hi] = it->second;
    ASSERT_EQ(f["count"].get<size_t>(), est.size()) << k;
    std::sort(est.begin(), est.end()), std::sort(lo.begin(), lo.end()), std::sort(hi.begin(), hi.end());
    for (auto [q, p] : {std::pair{"p50", 0.5}, {"p99", 0.99}, {"max", 1.0}}) {
      const size_t at = nearest_rank_index(est.size(), p);
      EXPECT_EQ(f[q]["ticks"].get<int64_t>(), est[at]) << k << " " << q;
      EXPECT_EQ(f[q]["ticks_lo"].get<int64_t>(), lo[at]) << k << " " << q;
      EXPECT_EQ(f[q]["ticks_hi"].get<int64_t>(), hi[at]) << k << " " << q;
    }
    flows++;
  }
  EXPECT_EQ(flows, by_flow.size()) << "netlat shows a flow top does not";
  EXPECT_EQ(flows, 4u) << "udp4, udp6 and tcp4 both ways";
  // The screen names them too.
  auto text = testutil::run(bin + " top " + run + " --flows --reference A --wait 0", tmp);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("-> 10.77.2.2:9100  A -> B  "), std::string::npos) << text.out;
  auto one = testutil::run(bin + " top " + (tmp / "A") + " --flows --wait 0", tmp);
  EXPECT_NE(one.status, 0);
  EXPECT_NE(one.err.find("--flows: " + (tmp / "A") + " is one node's trace"), std::string::npos) << one.err;
}

// The report of the translated run, given the nodes' traces, has a flows
// section: per flow and direction the row of `netlat --json` (counts, and
// p50/p99/max with their bounds, exact in data-*), and each flow's latency
// over time.
void expect_report_flows(const testutil::TempDir& tmp) {
  if (testutil::chromium().empty()) {
    ADD_FAILURE() << "chromium is not installed (tools/install-deps.sh installs it)";
    return;
  }
  const std::string bin = testutil::cptrace_bin(), a = tmp / "A", b = tmp / "B";
  auto tr = testutil::run(bin + " translate " + a + " " + b + " --reference A -o " + (tmp / "run"), tmp);
  ASSERT_EQ(tr.status, 0) << tr.err;
  auto rep = testutil::run(
      bin + " report " + (tmp / "run") + " --node-dir " + a + " --node-dir " + b + " -o " + (tmp / "r.html"), tmp);
  ASSERT_EQ(rep.status, 0) << rep.err;
  auto js = testutil::run(bin + " netlat " + a + " " + b + " --reference A --json", tmp);
  ASSERT_EQ(js.status, 0) << js.err;
  const nlohmann::json summary = nlohmann::json::parse(js.out);
  const std::string dom = testutil::rendered_dom(tmp / "r.html", tmp);
  ASSERT_NE(dom.find("data-rendered=\"1\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_EQ(dom.find("class=\"js-error\""), std::string::npos);
  auto escape = [](std::string s) {
    for (size_t p = 0; (p = s.find('>', p)) != std::string::npos; p += 4) s.replace(p, 1, "&gt;");
    return s;
  };
  size_t rows = 0;
  for (const auto& f : summary["flows"]) {
    const std::string flow = escape(f["flow"].get<std::string>());
    const std::string nodes = f["from"].get<std::string>() + " -&gt; " + f["to"].get<std::string>();
    size_t at = dom.find("data-key=\"flow\">" + flow + "</td><td class=\"\" data-key=\"nodes\">" + nodes + "<");
    ASSERT_NE(at, std::string::npos) << "no row for " << flow << " " << nodes;
    const std::string row = dom.substr(at, dom.find("</tr>", at) - at);
    for (const char* c : {"sent", "received", "matched", "retransmitted", "out_of_order"})
      EXPECT_NE(row.find(fmt::format("data-key=\"{}\">{}<", c, f[c].get<uint64_t>())), std::string::npos)
          << flow << " " << c << ": " << row;
    if (!f.contains("delay_ns")) continue;
    for (const char* q : {"p50", "p99", "p100"}) {
      const auto& d = f["delay_ns"][q];
      EXPECT_NE(row.find(fmt::format("data-key=\"{}\" data-ns=\"{}\" data-lo=\"{}\" data-hi=\"{}\"", q,
                                     d["ns"].get<int64_t>(), d["lo"].get<int64_t>(), d["hi"].get<int64_t>())),
                std::string::npos)
          << flow << " " << q << ": " << row;
    }
    const size_t arrow = flow.find(" -&gt; ");
    EXPECT_NE(dom.find("<g class=\"series\" data-pair=\"" + flow + "\" data-nodes=\"" + nodes + "\">"),
              std::string::npos)
        << "no latency over time for " << flow << " (" << arrow << ")";
    rows++;
  }
  EXPECT_GE(rows, 4u) << "udp4, udp6 and tcp4 both ways";

  // The nodes stamped their send calls: the application's view follows, the
  // rows of `netlat --writes --json`, each flow with its latency over time.
  auto wjs = testutil::run(bin + " netlat " + a + " " + b + " --reference A --writes --json", tmp);
  ASSERT_EQ(wjs.status, 0) << wjs.err;
  const size_t section = dom.find("class=\"write-stats\"");
  ASSERT_NE(section, std::string::npos) << "no application's view on the page";
  size_t write_rows = 0;
  const nlohmann::json wsummary = nlohmann::json::parse(wjs.out);  // kept: a range-for over a temporary's part dangles
  for (const auto& w : wsummary["writes"]) {
    const std::string flow = escape(w["flow"].get<std::string>());
    const std::string nodes = w["from"].get<std::string>() + " -&gt; " + w["to"].get<std::string>();
    const size_t at =
        dom.find("data-key=\"flow\">" + flow + "</td><td class=\"\" data-key=\"nodes\">" + nodes + "<", section);
    ASSERT_NE(at, std::string::npos) << "no application's view row for " << flow << " " << nodes;
    const std::string row = dom.substr(at, dom.find("</tr>", at) - at);
    for (const char* c : {"writes", "without_call_start", "unidentified", "undelivered", "delivered"})
      EXPECT_NE(row.find(fmt::format("data-key=\"{}\">{}<", c, w[c].get<uint64_t>())), std::string::npos)
          << flow << " " << c << ": " << row;
    for (const char* q : {"p50", "p99", "p100"}) {
      const auto& d = w["delay_ns"][q];
      EXPECT_NE(row.find(fmt::format("data-key=\"{}\" data-ns=\"{}\" data-lo=\"{}\" data-hi=\"{}\"", q,
                                     d["ns"].get<int64_t>(), d["lo"].get<int64_t>(), d["hi"].get<int64_t>())),
                std::string::npos)
          << "write " << flow << " " << q << ": " << row;
    }
    EXPECT_NE(dom.find("<g class=\"series\" data-pair=\"" + flow + "\" data-nodes=\"" + nodes + "\">", section),
              std::string::npos)
        << "no latency over time of the writes of " << flow;
    write_rows++;
  }
  EXPECT_EQ(write_rows, 4u) << "tcp4 both ways, udp4 and udp6";
}

TEST(Netlat, EveryPacketsOneWayDelayBoundContainsTheKernelsTruth) {
  REQUIRE_BPF();
  REQUIRE_TESTBED();
  Testbed tb("nl", 2, "--delay 100 --jitter 20 --asym 2:150");
  ASSERT_TRUE(tb.ok()) << tb.output();
  testutil::TempDir tmp;
  const std::string bin = testutil::cptrace_bin(), tests = (testutil::build_dir() / "tests").string();
  auto kg = testutil::run(bin + " keygen -o " + (tmp / "key"), tmp);
  ASSERT_EQ(kg.status, 0) << kg.err;
  const std::string sims[] = {"1500000000,20", "-2700000000,50"};
  const std::string peers[] = {"10.77.2.2:7711", "10.77.1.2:7711"};
  // B's command serves the datagrams (with a command, `--net` records its flows
  // only); A's client sends once the server is up (a datagram to a closed port
  // would fail its next send), then A's tuples go.
  const std::string go = tmp / "go", ready = tmp / "udp.out", ready6 = tmp / "udp6.out";
  const std::string nl = tests + "/netload";
  // The IPv4 datagrams' client alone in a cgroup named as Docker names a
  // container's (the rest stays where the test runs): netlat --cgroup and
  // --container must keep exactly its flow. `ip netns exec` hides /sys/fs/cgroup
  // from the recorded command: the test moves the client while it waits for `go`.
  const std::string cg_root = cgroup2_mount();
  ASSERT_FALSE(cg_root.empty()) << "no cgroup v2 hierarchy mounted";
  const std::string container = fmt::format("{:016x}{:048x}", uint64_t(getpid()) * 0x9e3779b97f4a7c15ull, 0xc0ffee);
  const CgroupDir cg(cg_root + "/docker-" + container + ".scope");
  ASSERT_TRUE(cg.made()) << cg.path << ": " << strerror(errno);
  // Each UDP side logs its calls' spans: the truth of which recv returned which send.
  const std::string stamps = "NETLOAD_STAMPS=" + (tmp / "");
  const std::string cmds[] = {
      "sh -c '" + stamps + "c4 " + nl + " client udp 10.77.2.2 9100 2000 " + go + " && " + stamps + "c6 " + nl +
          " client udp fd77::2:2 9101 500 && exec " + tests +
          "/pipeline --role A --connect 10.77.2.2:9000 --echo --connect-timeout 30 --tuples 600 --rate 200'",
      "sh -c '" + stamps + "s4 " + nl + " server udp 10.77.2.2 9100 2000 20000 > " + ready + " & " + stamps + "s6 " +
          nl + " server udp fd77::2:2 9101 500 20000 > " + ready6 + " & exec " + tests +
          "/pipeline --role B --listen 10.77.2.2:9000 --echo'"};
  const char* names[] = {"A", "B"};
  // top RUN --flows follows the recording live (its refreshes are checked once it ends).
  testutil::Proc live(
      bin + " top " + tmp.path.string() + " --flows --json --reference A --interval 1000 --wait 60 --gone-after 60",
      tmp / "top.out", tmp / "top.err");
  std::vector<std::unique_ptr<testutil::Proc>> rec;
  for (int k = 1; k >= 0; --k)  // B first: A connects to it
    rec.push_back(std::make_unique<testutil::Proc>(
        "ip netns exec " + tb.ns(k + 1) + " " + bin +
            " record --no-progress --net --net-send-calls --netns self --node " + names[k] + " --peers " + peers[k] +
            " --key " + (tmp / "key") + " --sync-rounds 40 --sync-wait 20 --simulate-clock " + sims[k] + " -o " +
            (tmp / names[k]) + " -- " + cmds[k],
        tmp / (std::string(names[k]) + ".out"), tmp / (std::string(names[k]) + ".err")));
  for (const std::string& r : {ready, ready6}) {
    for (int i = 0; i < 6000 && testutil::read_file(r).find("ready") == std::string::npos; ++i) usleep(10000);
    ASSERT_NE(testutil::read_file(r).find("ready"), std::string::npos) << testutil::read_file(rec[0]->err_path);
  }
  std::string client;
  std::string argv_head = nl + '\0';  // its /proc/PID/cmdline begins so
  for (const char* a : {"client", "udp", "10.77.2.2", "9100"}) argv_head += std::string(a) + '\0';
  for (int i = 0; i < 3000 && client.empty(); ++i, usleep(10000))
    for (const auto& d : std::filesystem::directory_iterator("/proc"))
      if (testutil::read_file(d.path() / "cmdline").rfind(argv_head, 0) == 0) client = d.path().filename().string();
  ASSERT_FALSE(client.empty()) << "the IPv4 client did not start";
  std::ofstream(cg.path + "/cgroup.procs") << client << std::flush;
  ASSERT_NE(testutil::read_file(cg.path + "/cgroup.procs").find(client), std::string::npos) << client;
  std::ofstream(go) << "go\n";
  for (auto& p : rec) ASSERT_EQ(p->wait(180), 0) << testutil::read_file(p->err_path);
  ASSERT_EQ(live.wait(120), 0) << testutil::read_file(live.err_path);
  expect_live_flows(testutil::read_file(live.out_path));
  TraceReader a(tmp / "A");
  ASSERT_FALSE(a.error()) << a.error()->what();
  const std::vector<ClockPoint> ref_clock = a.clock_map().points();
  ASSERT_GE(ref_clock.size(), 2u);

  std::string udp_received;  // as the CSV has them: every one matched
  size_t csv_rows = 0;  // of the default relation (both)
  for (const char* inputs : {"both", "rounds", "traffic"}) {
    const std::string args = " " + (tmp / "A") + " " + (tmp / "B") + " --reference A --inputs " + inputs;
    auto csv = testutil::run(bin + " netlat" + args + " --csv", tmp);
    ASSERT_EQ(csv.status, 0) << csv.err;
    std::map<std::string, size_t> checked, contained;
    std::map<std::string, std::vector<int64_t>> widths, delays;
    const std::vector<Row> rows = parse_csv(csv.out);
    if (std::string(inputs) == "both") csv_rows = rows.size();
    for (const Row& r : rows) {
      ASSERT_TRUE(r.guaranteed) << "linear clocks: no hull transition expected";
      const std::string k = r.proto + (r.saddr.find(':') != std::string::npos ? "6 " : "4 ") + r.from + "->" + r.to;
      const long double ns = (long double)r.rx_mono - (long double)r.tx_mono;
      const long double ticks = truth::interp(ref_clock, (long double)r.rx_mono, false) -
                                truth::interp(ref_clock, (long double)r.tx_mono, false);
      const bool ok = ns >= r.ns_lo && ns <= r.ns_hi && ticks >= r.ticks_lo && ticks <= r.ticks_hi;
      checked[k]++, contained[k] += ok;
      EXPECT_TRUE(ok) << inputs << " " << k << ": ns [" << r.ns_lo << ", " << r.ns_hi << "] truth " << (double)ns
                      << ", ticks [" << r.ticks_lo << ", " << r.ticks_hi << "] truth " << (double)ticks;
      widths[k].push_back(r.ns_hi - r.ns_lo), delays[k].push_back(int64_t(ns));
    }
    // Every datagram B received is matched (the delay queue may drop one).
    EXPECT_GE(checked["udp4 A->B"], 1900u) << inputs;
    // IPv6: B's server's socket names its flow (the recorder records a
    // command's flows only), so its datagrams' receives are recorded too.
    EXPECT_GE(checked["udp6 A->B"], 475u) << inputs;
    EXPECT_GE(checked["tcp4 A->B"], 100u) << inputs;
    EXPECT_GE(checked["tcp4 B->A"], 100u) << inputs;
    udp_received = std::to_string(checked["udp4 A->B"]);
    for (auto& [k, w] : widths) {
      std::sort(w.begin(), w.end());
      auto& d = delays[k];
      std::sort(d.begin(), d.end());
      printf("  [netlat %s] %-9s contained %zu / %zu; true delay p50 %lld ns, bound width p50 %lld max %lld ns\n",
             inputs, k.c_str(), contained[k], checked[k], (long long)d[d.size() / 2], (long long)w[w.size() / 2],
             (long long)w.back());
    }
  }

  // The application's view: each TCP write from its send call's entry to the
  // recv that returned its last byte, and each UDP datagram from its send call's
  // entry to the recv that returned it (IPv4: send on a connected socket, recv;
  // IPv6: sendmsg naming the destination, recvmsg, both in two buffers), both
  // kernel stamps on the shared CLOCK_MONOTONIC (the call's entry: the send
  // event's stamp less call_ns).
  {
    const std::string args = " " + (tmp / "A") + " " + (tmp / "B") + " --reference A --writes";
    auto csv = testutil::run(bin + " netlat" + args + " --csv", tmp);
    ASSERT_EQ(csv.status, 0) << csv.err;
    EXPECT_EQ(csv.out.rfind("from_node,to_node,proto,saddr,sport,daddr,dport,seq,len,send_ts,recv_ts,", 0), 0u);
    std::map<std::string, size_t> checked, contained, same_datagram;
    std::map<std::string, std::vector<int64_t>> widths, delays;
    std::map<std::string, std::vector<CallStamp>> calls;
    for (const char* f : {"c4", "c6", "s4", "s6"}) calls[f] = read_call_stamps(tmp / f);
    for (const Row& r : parse_csv(csv.out)) {
      ASSERT_TRUE(r.guaranteed);
      const char family = r.saddr.find(':') != std::string::npos ? '6' : '4';
      const std::string k = r.proto + family + " " + r.from + "->" + r.to;
      if (r.proto == "udp") {  // the send and the recv paired moved one datagram
        const long sent = datagram_at(calls[std::string("c") + family], r.tx_mono);
        const long got = datagram_at(calls[std::string("s") + family], r.rx_mono);
        EXPECT_TRUE(sent >= 0 && sent == got) << k << ": send of datagram " << sent << " paired with recv of " << got;
        same_datagram[k] += sent >= 0 && sent == got;
      }
      const long double ns = (long double)r.rx_mono - (long double)r.tx_mono;
      const long double ticks = truth::interp(ref_clock, (long double)r.rx_mono, false) -
                                truth::interp(ref_clock, (long double)r.tx_mono, false);
      const bool ok = ns >= r.ns_lo && ns <= r.ns_hi && ticks >= r.ticks_lo && ticks <= r.ticks_hi;
      checked[k]++, contained[k] += ok;
      EXPECT_TRUE(ok) << "write " << k << ": ns [" << r.ns_lo << ", " << r.ns_hi << "] truth " << (double)ns;
      EXPECT_GE(ns, 100000) << "a write's bytes cross the 100 us link before their recv returns";
      widths[k].push_back(r.ns_hi - r.ns_lo), delays[k].push_back(int64_t(ns));
    }
    EXPECT_GE(checked["tcp4 A->B"], 100u);
    EXPECT_GE(checked["tcp4 B->A"], 100u);
    EXPECT_GE(checked["udp4 A->B"], 1900u) << "every datagram B received (the delay queue may drop one)";
    EXPECT_GE(checked["udp6 A->B"], 475u);
    for (auto& [k, w] : widths) {
      std::sort(w.begin(), w.end());
      auto& d = delays[k];
      std::sort(d.begin(), d.end());
      printf("  [netlat --writes] %-8s contained %zu / %zu%s; true delay p50 %lld ns, bound width p50 %lld ns\n",
             k.c_str(), contained[k], checked[k],
             k[0] == 'u' ? fmt::format(", the right datagram {} / {}", same_datagram[k], checked[k]).c_str() : "",
             (long long)d[d.size() / 2], (long long)w[w.size() / 2]);
    }
    auto js = testutil::run(bin + " netlat" + args + " --json", tmp);
    ASSERT_EQ(js.status, 0) << js.err;
    const nlohmann::json j = nlohmann::json::parse(js.out);
    ASSERT_EQ(j["writes"].size(), 4u) << js.out;
    for (const auto& w : j["writes"]) {
      const std::string flow = w["flow"].get<std::string>();
      const bool udp = flow.rfind("udp ", 0) == 0;
      const std::string k = flow.substr(0, 3) + (flow.find("fd77") != std::string::npos ? "6 " : "4 ") +
                            w["from"].get<std::string>() + "->" + w["to"].get<std::string>();
      EXPECT_EQ(w["without_call_start"], 0) << "the pipeline writes with write()/send(), netload with send*()";
      EXPECT_EQ(w["unidentified"], 0) << "every datagram's payload is distinct: " << w.dump();
      EXPECT_EQ(w["delivered"].get<size_t>(), checked[k]) << k;
      if (udp) {
        EXPECT_EQ(w["writes"].get<size_t>(), k[3] == '6' ? 500u : 2000u) << k << ": each datagram is one write";
        EXPECT_EQ(w["delivered"].get<size_t>() + w["undelivered"].get<size_t>(), w["writes"].get<size_t>()) << k;
      } else {
        EXPECT_LE(w["undelivered"].get<size_t>(), 1u) << w.dump();
      }
    }
  }

  // An IPv6 socket event carries the socket's whole addresses.
  auto dump = testutil::run(bin + " dump " + (tmp / "B") + " --csv", tmp);
  EXPECT_NE(dump.out.find(",recv,"), std::string::npos);
  EXPECT_NE(dump.out.find(",udp,ipv6,fd77::2:2,9101,::,0,"), std::string::npos)
      << "no recv of the IPv6 server's unconnected socket with its own address";

  // The summary names each flow and direction with its counts and bounded percentiles.
  expect_cgroup_filters(tmp, cg.path, container);
  auto text = testutil::run(bin + " netlat " + (tmp / "A") + " " + (tmp / "B") + " --reference A --port 9100", tmp);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("udp 10.77.1.2:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("-> 10.77.2.2:9100   A -> B"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2000 sent by A, " + udp_received + " received by B, " + udp_received + " matched"),
            std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("tcp "), std::string::npos) << "--port 9100 keeps the datagrams only:\n" << text.out;
  auto js = testutil::run(bin + " netlat " + (tmp / "A") + " " + (tmp / "B") + " --reference A --json --from B", tmp);
  ASSERT_EQ(js.status, 0) << js.err;
  nlohmann::json j = nlohmann::json::parse(js.out);
  ASSERT_FALSE(j["flows"].empty());
  for (const auto& f : j["flows"]) {
    EXPECT_EQ(f["from"], "B") << f.dump();
    const auto& p = f["delay_ns"]["p50"];
    EXPECT_LE(p["lo"].get<int64_t>(), p["ns"].get<int64_t>());
    EXPECT_LE(p["ns"].get<int64_t>(), p["hi"].get<int64_t>());
    EXPECT_GE(p["hi"].get<int64_t>(), 100000) << "the link's 100 us delay lies below the bound's top";
  }
  // --addr keeps the flows with that address at either end: the IPv6 datagrams.
  auto v6 =
      testutil::run(bin + " netlat " + (tmp / "A") + " " + (tmp / "B") + " --reference A --json --addr fd77::2:2", tmp);
  ASSERT_EQ(v6.status, 0) << v6.err;
  nlohmann::json jv6 = nlohmann::json::parse(v6.out);
  ASSERT_EQ(jv6["flows"].size(), 1u) << v6.out;
  EXPECT_NE(jv6["flows"][0]["flow"].get<std::string>().find("-> [fd77::2:2]:9101"), std::string::npos) << v6.out;
  EXPECT_EQ(jv6["flows"][0]["matched"], jv6["flows"][0]["received"]) << v6.out;
  // --since / --until split the packets at an instant of the reference's clock
  // (seconds since A's start): every packet falls in exactly one of the two
  // windows, by its transmit. The truth (the shared CLOCK_MONOTONIC since A's
  // start) puts each within about 1 ms of its side: B's clock, seconds off,
  // is not what decides.
  {
    const std::string ab = " " + (tmp / "A") + " " + (tmp / "B") + " --reference A --csv";
    const double start_mono = a.meta()["start"]["mono_ns"].get<double>();
    auto all = testutil::run(bin + " netlat" + ab, tmp);
    ASSERT_EQ(all.status, 0) << all.err;
    const std::vector<Row> rows = parse_csv(all.out);
    ASSERT_FALSE(rows.empty());
    std::vector<double> sent;
    for (const Row& r : rows) sent.push_back((double(r.tx_mono) - start_mono) / 1e9);
    std::nth_element(sent.begin(), sent.begin() + long(sent.size() / 2), sent.end());
    const double t = sent[sent.size() / 2];
    auto before = testutil::run(bin + " netlat" + ab + fmt::format(" --until {:.6f}", t), tmp);
    auto after = testutil::run(bin + " netlat" + ab + fmt::format(" --since {:.6f}", t), tmp);
    ASSERT_EQ(before.status, 0) << before.err;
    ASSERT_EQ(after.status, 0) << after.err;
    const std::vector<Row> r1 = parse_csv(before.out), r2 = parse_csv(after.out);
    EXPECT_EQ(r1.size() + r2.size(), rows.size());
    EXPECT_GT(r1.size(), rows.size() / 4);
    EXPECT_GT(r2.size(), rows.size() / 4);
    // 1 ms (the bound widths) plus 100 ppm of t (the simulated rates are within
    // 50 ppm), so that a longer run on a slower host holds it too.
    const double tol = 1e-3 + 1e-4 * t;
    for (const Row& r : r1) EXPECT_LT((double(r.tx_mono) - start_mono) / 1e9, t + tol) << "--until " << t;
    for (const Row& r : r2) EXPECT_GE((double(r.tx_mono) - start_mono) / 1e9, t - tol) << "--since " << t;
    auto empty = testutil::run(bin + " netlat" + ab + " --since 2 --until 1", tmp);
    EXPECT_EQ(empty.status, 1);
    EXPECT_NE(empty.err.find("--since 2 --until 1: the window is empty"), std::string::npos) << empty.err;
  }
  auto bad_addr =
      testutil::run(bin + " netlat " + (tmp / "A") + " " + (tmp / "B") + " --reference A --addr 10.77.2", tmp);
  EXPECT_EQ(bad_addr.status, 1);
  EXPECT_NE(bad_addr.err.find("--addr 10.77.2: not an IPv4 or IPv6 address"), std::string::npos) << bad_addr.err;
  // Traces recorded without --net-send-calls have no write to measure: said, not guessed.
  for (const char* n : {"A", "B"}) {
    const std::string copy = tmp / (std::string(n) + "-plain");
    std::filesystem::copy(tmp / n, copy);
    nlohmann::json m = nlohmann::json::parse(testutil::read_file(tmp / (std::string(n) + "/meta.json")));
    EXPECT_EQ(m["net"]["send_calls"], true);
    m["net"]["send_calls"] = false;
    std::ofstream(copy + "/meta.json") << m.dump();
  }
  auto plain =
      testutil::run(bin + " netlat " + (tmp / "A-plain") + " " + (tmp / "B-plain") + " --reference A --writes", tmp);
  EXPECT_EQ(plain.status, 1);
  EXPECT_NE(plain.err.find("record them with `cptrace record --net --net-send-calls`"), std::string::npos) << plain.err;
  // A node the traces do not hold is named in the error.
  auto bad = testutil::run(bin + " netlat " + (tmp / "A") + " " + (tmp / "B") + " --reference A --from C", tmp);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--from C: no such node (the traces hold A, B)"), std::string::npos) << bad.err;

  expect_top_flows(tmp);
  expect_report_flows(tmp);

  // The tables for SQL: the packets of --csv, every node's side of each flow;
  // DuckDB's per-flow percentiles over them are netlat's, number for number.
  const std::string duckdb = (testutil::source_dir() / "tools" / "duckdb").string();
  if (system("command -v node >/dev/null 2>&1") != 0 ||
      !std::filesystem::exists(duckdb + "/node_modules/@duckdb/node-api/package.json"))
    GTEST_SKIP() << "SKIPPED: node or @duckdb/node-api missing (tools/install-deps.sh installs them)";
  const std::string ab = " " + (tmp / "A") + " " + (tmp / "B") + " --reference A";
  auto all = testutil::run(bin + " netlat" + ab + " --json", tmp);
  ASSERT_EQ(all.status, 0) << all.err;
  const nlohmann::json summary = nlohmann::json::parse(all.out);
  for (const char* form : {"", " --parquet"}) {
    const std::string dir = tmp / (*form ? "tables-parquet" : "tables-zst");
    auto t = testutil::run(bin + " netlat" + ab + " --table " + dir + form, tmp);
    ASSERT_EQ(t.status, 0) << t.err;
    auto n = testutil::run("node " + duckdb + "/query.mjs " + dir + " 'SELECT count(*) AS n FROM packets'", tmp);
    ASSERT_EQ(n.status, 0) << n.err;
    EXPECT_EQ(nlohmann::json::parse(n.out)[0]["n"].get<size_t>(), csv_rows) << form;
    auto q = testutil::run("node " + duckdb + "/query.mjs " + dir + " " + duckdb + "/examples/flow_p99.sql", tmp);
    ASSERT_EQ(q.status, 0) << q.err;
    std::map<std::string, nlohmann::json> by_flow;
    for (const auto& r : nlohmann::json::parse(q.out)) {
      auto end = [&](const char* a, const char* p) {
        const std::string addr = r[a];
        return (addr.find(':') != std::string::npos ? "[" + addr + "]" : addr) + ":" + std::to_string(r[p].get<int>());
      };
      by_flow[r["proto"].get<std::string>() + " " + end("saddr", "sport") + " -> " + end("daddr", "dport") + " " +
              r["from_node"].get<std::string>() + r["to_node"].get<std::string>()] = r;
    }
    size_t compared = 0;
    for (const auto& f : summary["flows"]) {
      if (!f.contains("delay_ns")) continue;
      const std::string key =
          f["flow"].get<std::string>() + " " + f["from"].get<std::string>() + f["to"].get<std::string>();
      ASSERT_TRUE(by_flow.count(key)) << key << " not in the SQL result:\n" << q.out;
      const nlohmann::json& r = by_flow[key];
      for (const char* p : {"p50", "p99"})
        for (const auto& [js, sql] : {std::pair{"ns", ""}, {"lo", "_lo"}, {"hi", "_hi"}})
          EXPECT_EQ(f["delay_ns"][p][js].get<int64_t>(), r[std::string(p) + sql].get<int64_t>())
              << key << " " << p << js;
      for (const char* c : {"sent", "retransmitted", "received", "out_of_order"})
        EXPECT_EQ(f[c].get<uint64_t>(), r[c].get<uint64_t>()) << key << " " << c;
      EXPECT_EQ(f["matched"].get<uint64_t>() - f["unbounded"].get<uint64_t>(), r["bounded"].get<uint64_t>()) << key;
      compared++;
    }
    EXPECT_EQ(compared, by_flow.size()) << q.out;
    EXPECT_GE(compared, 4u) << "udp4, udp6 and tcp4 both ways";
  }
}

}  // namespace
}  // namespace cptrace
