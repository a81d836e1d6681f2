// tests/svg_reader.h: reads an SVG document the project wrote as XML-ish text,
// for tests that assert what a picture must contain (a band polygon, an axis
// from zero, row labels, escaped names) rather than searching for substrings.
//
// defines: SvgElement, read_svg, elements_named, texts_of, point_values
//
// read_svg() accepts the subset of XML the base::Svg writer produces: start
// tags with quoted attributes, self-closing tags, end tags, character data with
// the five predefined entities and numeric references. Anything else (an end
// tag that does not close the open element, a raw '&' that is no entity, an
// unterminated tag, text outside the root) is reported through `error`.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace megascale::svg_testing {

struct SvgElement {
  std::string name;
  std::map<std::string, std::string> attrs;  // values unescaped
  std::string text;                          // its own character data, unescaped
  int depth = 0;                             // 0: the root
  std::string parent;                        // name of the enclosing element ("" for the root)

  double number(const std::string& attr) const {
    auto it = attrs.find(attr);
    return it == attrs.end() ? 0.0 : std::strtod(it->second.c_str(), nullptr);
  }
  bool has(const std::string& attr) const { return attrs.count(attr) > 0; }
};

// &amp; &lt; &gt; &quot; &apos; &#N; &#xN; -> characters; false on anything else.
inline bool unescape(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '<') return false;
    if (in[i] != '&') {
      *out += in[i];
      continue;
    }
    const size_t semi = in.find(';', i);
    if (semi == std::string::npos) return false;
    const std::string entity = in.substr(i + 1, semi - i - 1);
    if (entity == "amp") *out += '&';
    else if (entity == "lt") *out += '<';
    else if (entity == "gt") *out += '>';
    else if (entity == "quot") *out += '"';
    else if (entity == "apos") *out += '\'';
    else if (entity.size() > 1 && entity[0] == '#') {
      const long c = entity[1] == 'x' ? std::strtol(entity.c_str() + 2, nullptr, 16)
                                      : std::strtol(entity.c_str() + 1, nullptr, 10);
      if (c <= 0 || c > 127) return false;  // the writer emits ASCII references only
      *out += static_cast<char>(c);
    } else {
      return false;
    }
    i = semi;
  }
  return true;
}

// Every element of `doc`, in document order; `*error` is "" when the document
// is well formed.
inline std::vector<SvgElement> read_svg(const std::string& doc, std::string* error) {
  std::vector<SvgElement> out;
  std::vector<size_t> open;  // indices into `out`
  bool closed_root = false;
  error->clear();
  auto fail = [&](const std::string& why, size_t at) {
    if (error->empty()) *error = why + " at offset " + std::to_string(at);
  };
  size_t i = 0;
  while (i < doc.size() && error->empty()) {
    if (doc[i] != '<') {
      const size_t next = doc.find('<', i);
      const std::string raw = doc.substr(i, next == std::string::npos ? std::string::npos : next - i);
      std::string text;
      if (!unescape(raw, &text)) fail("bad character data '" + raw.substr(0, 40) + "'", i);
      if (open.empty()) {
        if (raw.find_first_not_of(" \t\r\n") != std::string::npos) fail("text outside the root", i);
      } else {
        out[open.back()].text += text;
      }
      i = next == std::string::npos ? doc.size() : next;
      continue;
    }
    if (doc.compare(i, 4, "<!--") == 0 || doc.compare(i, 2, "<?") == 0) {
      const size_t end = doc.find('>', i);
      if (end == std::string::npos) fail("unterminated declaration", i);
      i = end + 1;
      continue;
    }
    if (doc.compare(i, 2, "</") == 0) {
      const size_t end = doc.find('>', i);
      if (end == std::string::npos) {
        fail("unterminated end tag", i);
        break;
      }
      const std::string name = doc.substr(i + 2, end - i - 2);
      if (open.empty() || out[open.back()].name != name) {
        fail("end tag </" + name + "> does not close <" + (open.empty() ? "" : out[open.back()].name) + ">", i);
      } else {
        open.pop_back();
        if (open.empty()) closed_root = true;
      }
      i = end + 1;
      continue;
    }
    // A start tag: name, attributes name="value" or name='value', > or />.
    if (closed_root) fail("element after the root", i);
    size_t j = i + 1;
    while (j < doc.size() && (std::isalnum(static_cast<unsigned char>(doc[j])) || doc[j] == '-' || doc[j] == ':')) ++j;
    SvgElement e;
    e.name = doc.substr(i + 1, j - i - 1);
    if (e.name.empty()) fail("empty tag name", i);
    e.depth = static_cast<int>(open.size());
    e.parent = open.empty() ? "" : out[open.back()].name;
    bool self_closing = false;
    while (error->empty()) {
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size()) {
        fail("unterminated tag <" + e.name, i);
        break;
      }
      if (doc[j] == '>') {
        ++j;
        break;
      }
      if (doc.compare(j, 2, "/>") == 0) {
        self_closing = true;
        j += 2;
        break;
      }
      const size_t eq = doc.find('=', j);
      if (eq == std::string::npos || eq + 1 >= doc.size() || (doc[eq + 1] != '"' && doc[eq + 1] != '\'')) {
        fail("bad attribute in <" + e.name, j);
        break;
      }
      const std::string attr = doc.substr(j, eq - j);
      const size_t close = doc.find(doc[eq + 1], eq + 2);
      if (close == std::string::npos) {
        fail("unterminated attribute " + attr, j);
        break;
      }
      std::string value;
      if (!unescape(doc.substr(eq + 2, close - eq - 2), &value)) fail("bad attribute value of " + attr, eq);
      e.attrs[attr] = value;
      j = close + 1;
    }
    out.push_back(e);
    if (!self_closing) open.push_back(out.size() - 1);
    i = j;
  }
  if (error->empty() && !open.empty()) fail("<" + out[open.back()].name + "> not closed", doc.size());
  if (error->empty() && out.empty()) fail("no element", 0);
  return out;
}

inline std::vector<SvgElement> elements_named(const std::vector<SvgElement>& all, const std::string& name) {
  std::vector<SvgElement> out;
  for (const SvgElement& e : all)
    if (e.name == name) out.push_back(e);
  return out;
}

// The character data of every <text>.
inline std::vector<std::string> texts_of(const std::vector<SvgElement>& all) {
  std::vector<std::string> out;
  for (const SvgElement& e : all)
    if (e.name == "text") out.push_back(e.text);
  return out;
}

// "x1,y1 x2,y2 ..." -> {(x1, y1), (x2, y2), ...}.
inline std::vector<std::pair<double, double>> point_values(const std::string& points) {
  std::vector<std::pair<double, double>> out;
  const char* p = points.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    const double x = std::strtod(p, &end);
    if (end == p || *end != ',') break;
    p = end + 1;
    const double y = std::strtod(p, &end);
    if (end == p) break;
    out.emplace_back(x, y);
    p = end;
    while (*p == ' ') ++p;
  }
  return out;
}

}  // namespace megascale::svg_testing
