// The inline stylesheet and script of the HTML report (report_html.cpp). The
// script reads the JSON block #cptrace-data and draws every plot as SVG; it
// needs no network and no library. When done it sets data-rendered="1" on
// #report; an exception is shown on the page (class js-error) instead of a
// silently empty report.
#pragma once
#include <string>

namespace cptrace {

const std::string& report_css();
const std::string& report_js();

}  // namespace cptrace
