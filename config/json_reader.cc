#include "config/json_reader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace trainsim::config {

namespace {

// Builds the document from the parser's SAX events (as nlohmann's own DOM builder does) and
// rejects a key that appears twice in one object, which nlohmann would silently resolve by
// keeping the last value. Also knows the JSON path of the value being read, for errors the parser
// reports without a position. (nlohmann's callback parser would do the duplicate check too, but
// it rescans the parent container after every object: quadratic in the length of an array.)
class DocumentBuilder {
 public:
  DocumentBuilder(Json& root, const std::string& file) : root_(root), file_(file) {}

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return add(Json(v)); }
  bool string(Json::string_t& v) { return add(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return add(Json::binary(std::move(v))); }
  bool start_object(std::size_t /*elements*/) { return open(Json::object()); }
  bool start_array(std::size_t /*elements*/) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(Json::string_t& k) {
    Level& top = open_.back();
    if (top.container->contains(k)) {
      throw InputError(file_, join_path(path_of(open_.size() - 1), k),
                       "duplicate key \"" + k + "\" (each key may appear once per object)");
    }
    top.key = std::move(k);
    return true;
  }
  template <typename Exception>
  bool parse_error(std::size_t /*byte*/, const std::string& /*token*/, const Exception& e) {
    // Syntax errors read "[json.exception.parse_error.101] parse error at line 2, column 1:
    // syntax error ...": the position becomes the location. A number beyond double's range
    // ("1e999") comes without one: the path of the value being read is the location.
    std::string what = e.what();
    std::string location = current_path();
    const auto at = what.find(" at line ");
    const auto colon = what.find(": ", at == std::string::npos ? 0 : at);
    if (at != std::string::npos && colon != std::string::npos) {
      location = what.substr(at + 4, colon - at - 4);
      what = what.substr(colon + 2);
    } else if (const auto bracket = what.find("] "); bracket != std::string::npos) {
      what = what.substr(bracket + 2);
    }
    for (char& c : what) {
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';  // keep the message valid UTF-8
    }
    throw InputError(file_, location, "invalid JSON: " + what);
  }

 private:
  struct Level {
    Json* container;
    std::string key;  // objects: the key whose value comes next
  };
  // Where the next value goes. Only the innermost open container receives values, so pointers to
  // the open ones stay valid.
  Json* add_slot() {
    if (open_.empty()) return &root_;
    Level& top = open_.back();
    if (top.container->is_array()) {
      top.container->push_back(Json());
      return &top.container->back();
    }
    return &(*top.container)[top.key];
  }
  bool add(Json&& v) {
    *add_slot() = std::move(v);
    return true;
  }
  bool open(Json&& container) {
    Json* slot = add_slot();
    *slot = std::move(container);
    open_.push_back(Level{slot, {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }
  // The path of open container `level` (0 = outermost).
  std::string path_of(std::size_t level) const {
    std::string path;
    for (std::size_t i = 1; i <= level; ++i) {
      const Level& parent = open_[i - 1];
      path = parent.container->is_array() ? join_path(path, parent.container->size() - 1) : join_path(path, parent.key);
    }
    return path;
  }
  std::string current_path() const {
    if (open_.empty()) return "/";
    const Level& top = open_.back();
    const std::string base = path_of(open_.size() - 1);
    return top.container->is_array() ? join_path(base, top.container->size()) : join_path(base, top.key);
  }

  Json& root_;
  const std::string& file_;
  std::vector<Level> open_;
};

}  // namespace

std::size_t line_nested_deeper_than(const std::string& text, int limit) {
  int depth = 0;
  std::size_t line = 1;
  enum class State { kCode, kString, kEscape, kLineComment, kBlockComment } state = State::kCode;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    switch (state) {
      case State::kString:
        if (c == '\\') state = State::kEscape;
        if (c == '"') state = State::kCode;
        break;
      case State::kEscape:
        state = State::kString;
        break;
      case State::kLineComment:
        if (c == '\n') state = State::kCode;
        break;
      case State::kBlockComment:
        if (c == '*' && i + 1 < text.size() && text[i + 1] == '/') {
          state = State::kCode;
          ++i;
        }
        break;
      case State::kCode:
        if (c == '"') {
          state = State::kString;
        } else if (c == '/' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '*')) {
          state = text[i + 1] == '/' ? State::kLineComment : State::kBlockComment;
          ++i;
        } else if (c == '{' || c == '[') {
          if (++depth > limit) return line;
        } else if (c == '}' || c == ']') {
          --depth;
        }
        break;
    }
  }
  return 0;
}

bool is_valid_utf8(const std::string& text) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      extra = 1;
      cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2;
      cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3;
      cp = c & 0x07u;
    } else {
      return false;  // continuation byte, overlong 2-byte lead, or beyond U+10FFFF
    }
    for (std::size_t k = 1; k <= extra; ++k) {
      if (i + k >= n) return false;
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0u) != 0x80u) return false;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;  // overlong, out of range, or a UTF-16 surrogate
    }
    i += extra + 1;
  }
  return true;
}

Json parse_json_text(const std::string& text, const std::string& file) {
  // Depth first, so absurdly deep input cannot exhaust the stack of recursive JSON code.
  if (const std::size_t line = line_nested_deeper_than(text, kMaxJsonDepth); line != 0) {
    throw InputError(file, "line " + std::to_string(line),
                     "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  }
  Json root;
  DocumentBuilder builder(root, file);
  Json::sax_parse(text, &builder, nlohmann::json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/true);
  return root;
}

Json read_json_file(const std::string& path, std::size_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw InputError(path, "", "no such file");
  if (fs::is_directory(st)) throw InputError(path, "", "is a directory, expected a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot be read");
  // Read at most max_bytes + 1 bytes: a device or pipe that never ends is an error, not a hang
  // that ends in an out-of-memory kill.
  std::string text;
  std::array<char, 1 << 16> chunk{};
  while (in && text.size() <= max_bytes) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw InputError(path, "", "cannot be read");
  if (text.size() > max_bytes) {
    throw InputError(path, "", "larger than " + std::to_string(max_bytes >> 20) + " MiB, expected a JSON file");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw InputError(path, "", "is empty, expected a JSON object");
  return parse_json_text(text, path);
}

std::string join_path(const std::string& path, const std::string& key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return path + "/" + escaped;
}

std::string join_path(const std::string& path, std::size_t index) { return path + "/" + std::to_string(index); }

std::string describe(const Json& v) {
  std::string s;
  try {
    s = v.dump(-1, ' ', true, Json::error_handler_t::replace);
  } catch (...) {
    s = "<unprintable>";
  }
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  const char* type = v.is_object()   ? "an object"
                     : v.is_array()  ? "an array"
                     : v.is_string() ? "a string"
                     : v.is_boolean() ? "a boolean"
                     : v.is_null()   ? "null"
                                     : "a number";
  return std::string(type) + " " + s;
}

ObjectReader::ObjectReader(const Json& value, std::string file, std::string path)
    : value_(&value), file_(std::move(file)), path_(std::move(path)) {
  if (!value.is_object()) {
    throw InputError(file_, path_.empty() ? "/" : path_, "expected a JSON object, got " + describe(value));
  }
}

void ObjectReader::set_base(const Json& base, std::string file, std::string path) {
  if (!base.is_object()) throw InputError(file, path.empty() ? "/" : path, "expected a JSON object, got " + describe(base));
  base_ = &base;
  base_file_ = std::move(file);
  base_path_ = std::move(path);
}

const Json* ObjectReader::lookup(const std::string& key) const {
  auto it = value_->find(key);
  if (it != value_->end()) return &*it;
  if (base_ != nullptr) {
    auto b = base_->find(key);
    if (b != base_->end()) return &*b;
  }
  return nullptr;
}

bool ObjectReader::has(const std::string& key) const { return lookup(key) != nullptr; }

void ObjectReader::allow(std::initializer_list<const char*> keys) {
  for (const char* k : keys) allowed_.insert(k);
}

const std::string& ObjectReader::file_of(const std::string& key) const {
  if (value_->contains(key) || base_ == nullptr) return file_;
  return base_->contains(key) ? base_file_ : file_;
}

std::string ObjectReader::path_of(const std::string& key) const {
  if (value_->contains(key) || base_ == nullptr || !base_->contains(key)) return join_path(path_, key);
  return join_path(base_path_, key);
}

void ObjectReader::fail(const std::string& key, const std::string& message) const {
  throw InputError(file_of(key), path_of(key), message);
}

namespace {

// Levenshtein distance, for naming the likely typo of a missing key.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

void ObjectReader::fail_missing(const std::string& key, const std::string& want) const {
  std::string message = "missing; expected " + want;
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (key.size() > 3 && edit_distance(it.key(), key) <= 2) {
      message += " (the section has \"" + it.key() + "\": a misspelling?)";
      break;
    }
  }
  fail(key, message);
}

namespace {

std::string range_text(double min, double max) {
  std::ostringstream s;
  s.precision(12);
  if (min == -std::numeric_limits<double>::infinity() && max == std::numeric_limits<double>::infinity()) return "";
  if (max == std::numeric_limits<double>::infinity()) {
    s << " >= " << min;
  } else {
    s << " in [" << min << ", " << max << "]";
  }
  return s.str();
}

}  // namespace

std::int64_t ObjectReader::require_int(const std::string& key, std::int64_t min, std::int64_t max) {
  used_.insert(key);
  const Json* v = lookup(key);
  const std::string want = "an integer" + range_text(static_cast<double>(min), max == INT64_MAX ? std::numeric_limits<double>::infinity() : static_cast<double>(max));
  if (v == nullptr) fail_missing(key, want);
  std::int64_t out = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      fail(key, "expected " + want + ", got " + describe(*v));
    }
    out = v->get<std::int64_t>();
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e15) fail(key, "expected " + want + ", got " + describe(*v));
    out = static_cast<std::int64_t>(d);
  } else {
    fail(key, "expected " + want + ", got " + describe(*v));
  }
  if (out < min || out > max) fail(key, "expected " + want + ", got " + std::to_string(out));
  return out;
}

std::int64_t ObjectReader::get_int(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max) {
  if (!has(key)) {
    used_.insert(key);
    return fallback;
  }
  return require_int(key, min, max);
}

std::optional<std::int64_t> ObjectReader::get_optional_int(const std::string& key, std::int64_t min, std::int64_t max) {
  used_.insert(key);
  const Json* v = lookup(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return require_int(key, min, max);
}

double ObjectReader::require_double(const std::string& key, double min, double max) {
  used_.insert(key);
  const Json* v = lookup(key);
  const std::string want = "a number" + range_text(min, max);
  if (v == nullptr) fail_missing(key, want);
  if (!v->is_number()) fail(key, "expected " + want + ", got " + describe(*v));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) fail(key, "expected " + want + ", got " + describe(*v));
  return d;
}

double ObjectReader::get_double(const std::string& key, double fallback, double min, double max) {
  if (!has(key)) {
    used_.insert(key);
    return fallback;
  }
  return require_double(key, min, max);
}

std::optional<double> ObjectReader::get_optional_double(const std::string& key, double min, double max) {
  used_.insert(key);
  const Json* v = lookup(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  return require_double(key, min, max);
}

bool ObjectReader::get_bool(const std::string& key, bool fallback) {
  used_.insert(key);
  const Json* v = lookup(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(key, "expected true or false, got " + describe(*v));
  return v->get<bool>();
}

std::string ObjectReader::require_string(const std::string& key) {
  used_.insert(key);
  const Json* v = lookup(key);
  if (v == nullptr) fail_missing(key, "a string");
  if (!v->is_string()) fail(key, "expected a string, got " + describe(*v));
  return v->get<std::string>();
}

std::string ObjectReader::get_string(const std::string& key, const std::string& fallback) {
  if (!has(key)) {
    used_.insert(key);
    return fallback;
  }
  return require_string(key);
}

std::size_t ObjectReader::get_choice(const std::string& key, std::size_t fallback,
                                     std::initializer_list<const char*> choices) {
  if (!has(key)) {
    used_.insert(key);
    return fallback;
  }
  const Json* v = lookup(key);
  std::string list;
  for (const char* c : choices) list += (list.empty() ? "\"" : ", \"") + std::string(c) + "\"";
  if (!v->is_string()) {
    used_.insert(key);
    fail(key, "expected one of " + list + ", got " + describe(*v));
  }
  const std::string s = require_string(key);
  std::size_t i = 0;
  for (const char* c : choices) {
    if (s == c) return i;
    ++i;
  }
  fail(key, "expected one of " + list + ", got \"" + s + "\"");
}

ObjectReader ObjectReader::object(const std::string& key) {
  used_.insert(key);
  auto own = value_->find(key);
  const Json* base = base_ != nullptr && base_->contains(key) ? &base_->at(key) : nullptr;
  if (own != value_->end()) {
    ObjectReader r(*own, file_, join_path(path_, key));
    if (base != nullptr) r.set_base(*base, base_file_, join_path(base_path_, key));
    return r;
  }
  if (base != nullptr) return ObjectReader(*base, base_file_, join_path(base_path_, key));
  static const Json kEmpty = Json::object();
  return ObjectReader(kEmpty, file_, join_path(path_, key));
}

const Json* ObjectReader::raw(const std::string& key) {
  used_.insert(key);
  return lookup(key);
}

void ObjectReader::finish() const {
  auto check = [&](const Json& obj, const std::string& file, const std::string& path) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (used_.count(it.key()) || allowed_.count(it.key())) continue;
      std::string known;
      for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(file, join_path(path, it.key()),
                       "unknown key \"" + it.key() + "\"" + (known.empty() ? "" : "; expected one of: " + known));
    }
  };
  check(*value_, file_, path_);
  if (base_ != nullptr) check(*base_, base_file_, base_path_);
}

}  // namespace trainsim::config
