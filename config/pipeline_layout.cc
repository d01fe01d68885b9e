#include "config/pipeline_layout.h"

#include <cctype>

namespace trainsim::config {
namespace {

// Expansions beyond this many symbols are refused (a layout names at most a few thousand).
constexpr std::size_t kMaxSymbols = std::size_t{1} << 20;

class Expander {
 public:
  explicit Expander(const std::string& text) : text_(text) {}

  // The layout with repetitions written out and commas dropped; sets `error` on bad input.
  std::string run(std::string& error) {
    std::string out = sequence(0, error);
    if (error.empty() && pos_ < text_.size()) error = at("unmatched ')'");
    return error.empty() ? out : std::string();
  }

 private:
  std::string at(const std::string& what) const {
    return what + " at character " + std::to_string(pos_ + 1) + " of \"" + text_ + "\"";
  }

  std::string sequence(int depth, std::string& error) {
    std::string out;
    while (error.empty() && pos_ < text_.size() && text_[pos_] != ')') {
      const char c = text_[pos_];
      std::string item;
      if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
        continue;
      }
      if (c == '(') {
        if (depth >= 32) {
          error = at("parentheses nested deeper than 32");
          return out;
        }
        ++pos_;
        item = sequence(depth + 1, error);
        if (!error.empty()) return out;
        if (pos_ >= text_.size()) {
          error = at("expected ')'");
          return out;
        }
        ++pos_;
      } else if (c == 'E' || c == 't' || c == 'L' || c == 'm' || c == '|') {
        item = std::string(1, c);
        ++pos_;
      } else {
        error = at(std::string("unexpected '") + c + "' (expected E, t, L, m, |, (, ), *N or ,)");
        return out;
      }
      std::size_t times = 1;
      if (pos_ < text_.size() && text_[pos_] == '*') {
        ++pos_;
        if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          error = at("expected a count after '*'");
          return out;
        }
        times = 0;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          times = times * 10 + static_cast<std::size_t>(text_[pos_] - '0');
          if (times > kMaxSymbols) {
            error = at("repetition count over " + std::to_string(kMaxSymbols));
            return out;
          }
          ++pos_;
        }
      }
      if (!item.empty() && times > (kMaxSymbols - out.size()) / item.size()) {
        error = at("layout expands to more than " + std::to_string(kMaxSymbols) + " symbols");
        return out;
      }
      for (std::size_t i = 0; i < times; ++i) out += item;
    }
    return out;
  }

  const std::string& text_;
  std::size_t pos_ = 0;
};

}  // namespace

PipelineLayout parse_pipeline_layout(const std::string& text) {
  PipelineLayout out;
  const std::string symbols = Expander(text).run(out.error);
  if (!out.error.empty()) return out;
  auto fail = [&](const std::string& message) {
    out.layers.clear();
    out.error = message + " (in \"" + text + "\")";
    return out;
  };
  std::vector<std::string> stages(1);
  for (char c : symbols) {
    if (c == '|') {
      stages.emplace_back();
    } else {
      stages.back() += c;
    }
  }
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string& s = stages[i];
    std::int64_t layers = 0;
    bool mtp_run_checked = false;  // the run of 'm' is checked once, at its first 'm' (linear time)
    for (std::size_t k = 0; k < s.size(); ++k) {
      switch (s[k]) {
        case 't':
          ++layers;
          break;
        case 'm':
          // A run of 'm' closed by the loss: the modules on the last stage, after the decoder.
          if (!mtp_run_checked &&
              (i + 1 != stages.size() || s.find_first_not_of('m', k) != s.size() - 1 || s.back() != 'L')) {
            return fail("virtual stage " + std::to_string(i) +
                        ": multi-token-prediction layers ('m') are modelled only as a run just before the loss 'L' "
                        "(where Megatron builds them with the output layer), not apart from it");
          }
          mtp_run_checked = true;
          ++out.mtp_layers;
          break;
        case 'E':
          if (i != 0 || k != 0) return fail("the embedding 'E' must open the first virtual stage, found in stage " + std::to_string(i));
          break;
        case 'L':
          if (i + 1 != stages.size() || k + 1 != s.size()) {
            return fail("the loss 'L' must close the last virtual stage, found in stage " + std::to_string(i));
          }
          break;
        default:
          break;
      }
    }
    out.layers.push_back(layers);
  }
  if (stages.front().empty() || stages.front().front() != 'E') return fail("expected the embedding 'E' to open the first virtual stage");
  if (stages.back().empty() || stages.back().back() != 'L') return fail("expected the loss 'L' to close the last virtual stage");
  return out;
}

}  // namespace trainsim::config
