// Stylesheet and drawing script of the HTML report. They live as real files
// (report.css, report.js) so editors, linters and `node --check` see them; the
// build turns each into a raw string literal (build/report.*.inc, like the BPF skeletons; Makefile rule
// "report assets") that is included here.
#include "analyze/report_js.h"

namespace cptrace {

const std::string& report_css() {
  static const std::string css =
#include "report.css.inc"
      ;
  return css;
}

const std::string& report_js() {
  static const std::string js =
#include "report.js.inc"
      ;
  return js;
}

}  // namespace cptrace
