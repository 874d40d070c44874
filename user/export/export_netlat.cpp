// netlat's packets and flows as tables (export_netlat.h).
#include "export/export_netlat.h"

#include <exception>
#include <optional>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tables/parquet_writer.h"
#include "netlat/netlat_output.h"
#include "trace/net_codec.h"
#include "os/output_dir.h"
#include "os/say.h"

namespace cptrace {
namespace {

bool netlat_table_owns(const std::string& name) { return is_table_file(name, {"packets", "flows"}); }
// The flows table is written last: its presence marks a whole export.
const OutputKind kNetlatTable{"netlat table export", "flows.csv.zst", netlat_table_owns};
const OutputKind kNetlatPlainTable{"netlat table export", "flows.csv", netlat_table_owns};
const OutputKind kNetlatParquetTable{"netlat table export", "flows.parquet", netlat_table_owns};

using K = ParquetWriter::Kind;
const std::vector<ParquetWriter::ColumnSpec> kPacketColumns = {
    {"from_node", K::String},  {"to_node", K::String}, {"proto", K::String},   {"saddr", K::String},
    {"sport", K::UInt16},      {"daddr", K::String},   {"dport", K::UInt16},   {"seq", K::UInt32},
    {"len", K::UInt32},        {"tx_ts", K::UInt64},   {"rx_ts", K::UInt64},   {"tx_mono_ns", K::UInt64},
    {"rx_mono_ns", K::UInt64}, {"ticks", K::Int64},    {"ticks_lo", K::Int64}, {"ticks_hi", K::Int64},
    {"ns", K::Int64},          {"ns_lo", K::Int64},    {"ns_hi", K::Int64},    {"guaranteed", K::Bool}};
const std::vector<ParquetWriter::ColumnSpec> kFlowColumns = {
    {"proto", K::String},    {"saddr", K::String},       {"sport", K::UInt16}, {"daddr", K::String},
    {"dport", K::UInt16},    {"node", K::String},        {"sent", K::UInt64},  {"retransmitted", K::UInt64},
    {"received", K::UInt64}, {"out_of_order", K::UInt64}};
constexpr uint64_t kWriterMemory = uint64_t(64) << 20;

// A table as Parquet rows or CSV text: the caller gives each row both ways.
class NetlatTable {
 public:
  NetlatTable(const OutputDir& dir, const std::string& stem, TableForm form,
              const std::vector<ParquetWriter::ColumnSpec>& cols) {
    if (form != TableForm::Parquet) {
      csv_.emplace(dir, stem, form, false);
      return;
    }
    file_.emplace(dir, table_file_name(stem, form));
    pq_.emplace(*file_, cols, false, ParquetWriter::shape_for(kWriterMemory, cols.size()));
  }
  ParquetWriter* parquet() { return pq_ ? &*pq_ : nullptr; }
  void text(std::string& buf) {
    if (buf.size() > (1 << 20)) csv_->write(buf), buf.clear();
  }
  void close(std::string& buf) {
    if (pq_) return pq_->close();
    csv_->write(buf);
    csv_->close();
  }

 private:
  std::optional<TableFile> csv_;
  std::optional<OutFile> file_;
  std::optional<ParquetWriter> pq_;
};

void put_packet(ParquetWriter& w, const std::vector<std::string>& nodes, const PacketDelay& d) {
  const cp_net_rec& r = d.rx->r;
  size_t c = 0;
  for (const std::string& s :
       {nodes[d.tx_node], nodes[d.rx_node], std::string(net_proto_name(r.proto)), net_addr(r, true)})
    w.put_code(c, w.code(c, s)), c++;
  w.put_int(c++, r.sport);
  w.put_code(c, w.code(c, net_addr(r, false))), c++;
  for (int64_t v :
       {int64_t(r.dport), int64_t(r.seq), int64_t(r.len), int64_t(d.tx->ts), int64_t(d.rx->ts),
        int64_t(d.tx->r.ktime_ns), int64_t(r.ktime_ns), d.ticks.est, d.ticks.lo, d.ticks.hi, d.ns.ns, d.ns.lo, d.ns.hi})
    w.put_int(c++, v);
  w.put_bool(c, d.guaranteed);
  w.end_row();
}

// The flows table: every node's side of every flow the filters kept.
uint64_t write_flows(const NetlatResult& res, NetlatTable& t) {
  std::string buf = "proto,saddr,sport,daddr,dport,node,sent,retransmitted,received,out_of_order\n";
  uint64_t rows = 0;
  for (const auto& [f, by_node] : res.flows.sides()) {
    const std::string proto = net_proto_name(f.proto), saddr = f.addr(true), daddr = f.addr(false);
    for (const auto& [n, s] : by_node) {
      rows++;
      if (ParquetWriter* w = t.parquet()) {
        size_t c = 0;
        w->put_code(c, w->code(c, proto)), c++;
        w->put_code(c, w->code(c, saddr)), c++;
        w->put_int(c++, f.sport);
        w->put_code(c, w->code(c, daddr)), c++;
        w->put_int(c++, f.dport);
        w->put_code(c, w->code(c, res.nodes[n])), c++;
        for (uint64_t v : {s.tx, s.retransmitted, s.rx, s.out_of_order}) w->put_int(c++, int64_t(v));
        w->end_row();
        continue;
      }
      fmt::format_to(std::back_inserter(buf), "{},{},{},{},{},{},{},{},{},{}\n", proto, saddr, f.sport, daddr, f.dport,
                     res.nodes[n], s.tx, s.retransmitted, s.rx, s.out_of_order);
      t.text(buf);
    }
  }
  t.close(buf);
  return rows;
}

}  // namespace

NetlatTableStats export_netlat_tables(const NetlatOptions& opt, const std::string& out, TableForm form,
                                      bool overwrite) {
  const OutputKind& kind = form == TableForm::Parquet ? kNetlatParquetTable
                           : form == TableForm::Plain ? kNetlatPlainTable
                                                      : kNetlatTable;
  OutputDir dir(out, kind, overwrite);
  NetlatTableStats s;
  try {
    NetlatTable packets(dir, "packets", form, kPacketColumns);
    std::string buf = kNetlatCsvHeader;
    const NetlatResult res = netlat(opt, [&](const NetlatResult& r, const PacketDelay& d) {
      s.packets++;
      if (ParquetWriter* w = packets.parquet()) return put_packet(*w, r.nodes, d);
      append_netlat_csv_row(buf, r.nodes, d);
      packets.text(buf);
    });
    packets.close(buf);
    NetlatTable flows(dir, "flows", form, kFlowColumns);
    s.flows = write_flows(res, flows);
  } catch (...) {
    // No half export: a table cut short must not pass for a whole one.
    for (const char* stem : {"packets", "flows"}) ::unlinkat(dir.fd(), table_file_name(stem, form).c_str(), 0);
    throw;
  }
  return s;
}

int run_netlat_table(const NetlatOptions& opt, const std::string& out, TableForm form, bool overwrite) {
  const NetlatTableStats s = export_netlat_tables(opt, out, form, overwrite);
  say("{} packets -> {}/{}, {} flow sides -> {}/{}", s.packets, out, table_file_name("packets", form), s.flows, out,
      table_file_name("flows", form));
  return 0;
}

}  // namespace cptrace
