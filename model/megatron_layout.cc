// model/megatron_layout.cc: see megatron_layout.h.
#include "model/megatron_layout.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace megascale::model {
namespace {

// Generous: Megatron-Core layouts have pp x vpp stages of a few letters each.
constexpr std::size_t kMaxExpandedChars = 1 << 20;

[[noreturn]] void fail(const std::string& why) { throw std::invalid_argument(why); }

// The user's text for a message: bytes outside printable ASCII as \xNN.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02X}", u);
    }
  }
  return out;
}

// One character for a message: 'c', or its byte value outside printable ASCII.
std::string shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u < 0x7f ? fmt::format("'{}'", c) : fmt::format("byte 0x{:02X}", u);
}

// Reads the count after the '*' at text[*i]; advances past it. `where` names
// the place in the user's text for errors.
int read_count(std::string_view text, std::size_t* i, const std::string& where) {
  if (*i >= text.size() || text[*i] != '*') fail(fmt::format("')' {} must be followed by '*n'", where));
  std::size_t j = *i + 1;
  long long n = 0;
  while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])) != 0) {
    n = n * 10 + (text[j] - '0');
    if (n > 1'000'000) fail(fmt::format("the repeat count {} is too large", where));
    ++j;
  }
  if (j == *i + 1) fail(fmt::format("the '*' {} must be followed by a count", where));
  if (n < 1) fail(fmt::format("the repeat count {} must be >= 1", where));
  *i = j;
  return static_cast<int>(n);
}

void append_repeated(std::string* out, std::string_view piece, int n) {
  if (out->size() + piece.size() * static_cast<std::size_t>(n) > kMaxExpandedChars) {
    fail(fmt::format("expands to more than {} characters", kMaxExpandedChars));
  }
  for (int k = 0; k < n; ++k) out->append(piece);
}

// Megatron-Core's two unrolling passes: "(...)*n" first, then "x*n".
std::string expand(std::string_view raw) {
  std::string pass1;
  for (std::size_t i = 0; i < raw.size();) {
    const char c = raw[i];
    if (c == ')') fail(fmt::format("')' at character {} has no '('", i + 1));
    if (c != '(') {
      if (c != ',') pass1.push_back(c);
      ++i;
      continue;
    }
    const std::size_t close = raw.find(')', i + 1);
    const std::size_t nested = raw.find('(', i + 1);
    if (close == std::string_view::npos) fail(fmt::format("'(' at character {} is not closed", i + 1));
    if (nested < close) fail(fmt::format("'(' at character {}: brackets do not nest", nested + 1));
    std::string inner;
    for (char x : raw.substr(i + 1, close - i - 1)) {
      if (x != ',') inner.push_back(x);
    }
    if (inner.empty()) fail(fmt::format("'()' at character {} is empty", i + 1));
    std::size_t j = close + 1;
    const int n = read_count(raw, &j, fmt::format("at character {}", close + 1));
    append_repeated(&pass1, inner, n);
    i = j;
  }
  std::string out;
  for (std::size_t i = 0; i < pass1.size();) {
    if (pass1[i] == '*') fail("'*n' must follow a layer letter, a '|' or a ')'");
    if (i + 1 < pass1.size() && pass1[i + 1] == '*') {
      std::size_t j = i + 1;
      const int n = read_count(pass1, &j, fmt::format("after {}", shown(pass1[i])));
      append_repeated(&out, pass1.substr(i, 1), n);
      i = j;
      continue;
    }
    out.push_back(pass1[i]);
    ++i;
  }
  return out;
}

}  // namespace

std::vector<int> parse_megatron_layout(std::string_view text, int layers) {
  if (text.empty()) fail("empty layout");
  std::string expanded;
  try {
    expanded = expand(text);
  } catch (const std::invalid_argument& e) {
    fail(fmt::format("'{}': {}", printable(text), e.what()));
  }
  // Unknown characters first: a stray one may sit after the 'L' it would
  // otherwise be blamed on.
  for (const char c : expanded) {
    if (c == 'E' || c == 't' || c == 'L' || c == 'm' || c == '|') continue;
    fail(fmt::format("'{}': {} is no layer letter (E embedding, t transformer layer, L loss; '|' separates "
                     "virtual stages, ',' is ignored, '(...)*n' and 'x*n' repeat)",
                     printable(text), shown(c)));
  }
  if (std::count(expanded.begin(), expanded.end(), 'E') > 1) {
    fail(fmt::format("'{}': more than one embedding 'E'", printable(text)));
  }
  if (std::count(expanded.begin(), expanded.end(), 'L') > 1) {
    fail(fmt::format("'{}': more than one loss 'L'", printable(text)));
  }
  std::vector<int> stages(1, 0);
  int embeddings = 0, losses = 0, decoders = 0;
  for (std::size_t i = 0; i < expanded.size(); ++i) {
    const char c = expanded[i];
    const std::size_t stage = stages.size() - 1;
    switch (c) {
      case '|': stages.push_back(0); break;
      case 't':
        ++stages.back();
        ++decoders;
        break;
      case 'E':
        if (i != 0) {
          fail(fmt::format("'{}': the embedding 'E' must come first (it is in virtual stage {})", printable(text),
                           stage));
        }
        ++embeddings;
        break;
      case 'L':
        if (i + 1 != expanded.size()) {
          fail(fmt::format("'{}': the loss 'L' must come last (it is in virtual stage {} of {})", printable(text), stage,
                           1 + std::count(expanded.begin(), expanded.end(), '|')));
        }
        ++losses;
        break;
      case 'm':
        fail(fmt::format("'{}': multi-token-prediction layers ('m') are not modelled", printable(text)));
      default: break;  // refused above
    }
  }
  if (embeddings != 1) {
    fail(fmt::format("'{}': the first virtual stage must start with the embedding 'E'", printable(text)));
  }
  if (losses != 1) fail(fmt::format("'{}': the last virtual stage must end with the loss 'L'", printable(text)));
  if (decoders != layers) {
    fail(fmt::format("'{}' holds {} transformer layers ('t'), the model has {} (model.layers)", printable(text),
                     decoders, layers));
  }
  return stages;
}

std::string format_megatron_layout(const std::vector<int>& stages) {
  const std::size_t n = stages.size();
  if (n == 0) return "";
  auto stage_text = [&](std::size_t v) {
    std::string t = v == 0 ? "E" : "";
    if (stages[v] == 1) t += "t";
    if (stages[v] > 1) t += fmt::format("t*{}", stages[v]);
    if (v + 1 == n) t += "L";
    return t;
  };
  std::string out = stage_text(0);
  if (n == 1) return out;
  out += "|";
  for (std::size_t v = 1; v + 1 < n;) {
    std::size_t run = 1;
    while (v + run + 1 < n && stages[v + run] == stages[v]) ++run;
    if (run > 1) {
      out += fmt::format("({}|)*{},", stage_text(v), run);
    } else {
      out += stage_text(v) + "|";
    }
    v += run;
  }
  return out + stage_text(n - 1);
}

}  // namespace megascale::model
