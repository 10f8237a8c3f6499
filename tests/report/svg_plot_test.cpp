// The hand-written SVG plots: well-formed XML, the axes, ticks, labels and legend a reader needs,
// escaped text, and the "no data" case.
#include "report/svg_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace gpufrac {
namespace {

// A small XML well-formedness check: one root, tags nest and close, attribute values quoted,
// no raw '<' or stray '&' in text. Returns "" when well-formed, else what is wrong.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  if (xml.rfind("<?xml", 0) == 0) i = xml.find("?>") + 2;
  static const std::regex kEntity("^&(amp|lt|gt|quot|apos|#[0-9]+);");
  while (i < xml.size()) {
    if (xml[i] == '<') {
      size_t end = xml.find('>', i);
      if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
      std::string tag = xml.substr(i + 1, end - i - 1);
      if (tag.empty()) return "empty tag";
      if (tag[0] == '/') {
        if (open.empty() || open.back() != tag.substr(1))
          return "mismatched </" + tag.substr(1) + ">";
        open.pop_back();
      } else {
        bool self_closing = tag.back() == '/';
        if (self_closing) tag.pop_back();
        std::string name = tag.substr(0, tag.find_first_of(" \n\t"));
        std::string attributes = tag.substr(name.size());
        static const std::regex kAttributes(R"(^(\s+[A-Za-z_:][-A-Za-z0-9_:.]*="[^"<]*")*\s*$)");
        if (!std::regex_match(attributes, kAttributes)) return "bad attributes in <" + name + ">";
        if (open.empty() && ++roots > 1) return "more than one root element";
        if (!self_closing) open.push_back(name);
      }
      i = end + 1;
    } else {
      if (xml[i] == '&' && !std::regex_search(xml.substr(i, 10), kEntity)) return "stray &";
      if (xml[i] == '>') return "raw > in text";
      if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i])))
        return "text outside root";
      ++i;
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return roots == 1 ? "" : "no root element";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

Plot study_like_plot() {
  return {
      "Output tok/s per GPU vs requests resident per GPU",
      "requests resident per GPU",
      "output tok/s per GPU",
      true,
      {{"baseline", {{1, 111.4}, {2, 227.5}, {4, 429.1}, {8, 671.2}, {16, 929.2}, {32, 1141.8}}},
       {"HAMi <&> \"quoted\"", {{2, 101.1}, {4, 193.0}, {64, 943.0}}},
       {"fractions", {{2, 144.4}, {64, 1132.4}}},
       {"empty", {}}}};
}

TEST(XmlCheck, CatchesBrokenDocuments) {
  EXPECT_EQ(xml_problem("<svg><g/></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<svg a=b/>"), "");
  EXPECT_NE(xml_problem("<svg>a & b</svg>"), "");
  EXPECT_NE(xml_problem("<svg/><svg/>"), "");
}

TEST(SvgPlot, IsWellFormedWithAxesTicksLabelsAndLegend) {
  std::string svg = render_svg(study_like_plot());
  EXPECT_EQ(xml_problem(svg), "") << svg;
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find(">requests resident per GPU</text>"), std::string::npos);
  EXPECT_NE(svg.find("rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">output tok/s per GPU<"),
            std::string::npos);
  for (const char* tick : {">1<", ">2<", ">4<", ">8<", ">16<", ">32<", ">64<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  }
  for (const char* tick : {">0<", ">250<", ">1250<"})
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_EQ(count(svg, "<polyline"), 3u);  // the empty series draws nothing
  EXPECT_NE(svg.find(">HAMi &lt;&amp;&gt; &quot;quoted&quot;</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">empty<"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 6u + 1u);  // baseline's markers and its legend marker
}

TEST(SvgPlot, EveryCoordinateIsInsideTheCanvas) {
  std::string svg = render_svg(study_like_plot());
  std::regex coordinate(R"((?:cx|cy|x|y|x1|x2|y1|y2)="(-?[0-9.]+)\")");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), coordinate);
       it != std::sregex_iterator(); ++it) {
    double v = std::stod((*it)[1]);
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 780);
  }
}

TEST(SvgPlot, NoPointsSaysNoData) {
  Plot plot{"t", "x", "y", false, {{"a", {{1, NAN}}}}};
  std::string svg = render_svg(plot);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find(">no data</text>"), std::string::npos);
}

TEST(Ticks, LinearStartsAtZeroAndCoversTheData) {
  AxisTicks t = linear_ticks(101.1, 1141.8);
  EXPECT_EQ(t.low, 0);
  EXPECT_EQ(t.high, 1250);
  EXPECT_EQ(t.ticks, (std::vector<double>{0, 250, 500, 750, 1000, 1250}));
  AxisTicks small = linear_ticks(8.58, 55.9);
  EXPECT_EQ(small.ticks.front(), 0);
  EXPECT_GE(small.high, 55.9);
  EXPECT_LE(small.ticks.size(), 8u);
  AxisTicks flat = linear_ticks(0, 0);
  EXPECT_GT(flat.high, flat.low);
  AxisTicks negative = linear_ticks(-3, 7);
  EXPECT_LE(negative.low, -3);
  EXPECT_GE(negative.high, 7);
}

TEST(Ticks, Log2PowersOfTwo) {
  EXPECT_EQ(log2_ticks(2, 64).ticks, (std::vector<double>{2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(log2_ticks(3, 3).ticks, (std::vector<double>{2, 4}));
  EXPECT_EQ(log2_ticks(0.5, 1).ticks, (std::vector<double>{0.5, 1}));
}

}  // namespace
}  // namespace gpufrac
