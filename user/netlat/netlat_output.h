// What `cptrace netlat` prints: the summary per flow and direction (text or
// JSON), and one CSV row per matched packet.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "netlat/netlat.h"

namespace cptrace {

void print_netlat_text(const NetlatResult& res, std::FILE* out);
nlohmann::json netlat_json(const NetlatResult& res);

// The packet rows' CSV: the header line, and one packet's line appended to
// `buf` (the same text for --csv and the packets table of --table).
extern const char* const kNetlatCsvHeader;
void append_netlat_csv_row(std::string& buf, const std::vector<std::string>& nodes, const PacketDelay& d);

// --writes --csv: one line per measured write (send_* the call's entry,
// recv_* the recv that returned its last byte).
extern const char* const kWritesCsvHeader;

// One CSV line per packet (or write), buffered; the header on construction.
class NetlatCsv {
 public:
  explicit NetlatCsv(std::FILE* out, const char* header = kNetlatCsvHeader);
  ~NetlatCsv();
  void row(const std::vector<std::string>& nodes, const PacketDelay& d);
  void row(const std::vector<std::string>& nodes, const WriteDelay& d);

 private:
  void flush();
  std::FILE* out_;
  std::string buf_;
};

}  // namespace cptrace
