#include "config/json_reader.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace trainsim::config {

namespace {

constexpr std::size_t kMaxFileBytes = 256u << 20;  // larger inputs are not scenario files

// Counts nesting depth before parsing so absurdly deep input cannot exhaust the stack.
void check_depth(const std::string& text, const std::string& file) {
  int depth = 0;
  bool in_string = false, escaped = false;
  std::size_t line = 1;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > 128) throw InputError(file, "line " + std::to_string(line), "JSON nested more than 128 levels deep");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

}  // namespace

Json parse_json_text(const std::string& text, const std::string& file) {
  check_depth(text, file);
  try {
    return Json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const Json::out_of_range& e) {
    std::string what = e.what();
    throw InputError(file, "", "invalid JSON: " + what.substr(what.find(']') == std::string::npos ? 0 : what.find(']') + 2));
  } catch (const Json::parse_error& e) {
    // nlohmann's message reads "[json.exception.parse_error.101] parse error at line 2, column 1:
    // syntax error ..."; keep the position as the location and the rest as the message.
    std::string what = e.what();
    std::string location;
    const auto at = what.find(" at line ");
    const auto colon = what.find(": ", at == std::string::npos ? 0 : at);
    if (at != std::string::npos && colon != std::string::npos) {
      location = what.substr(at + 4, colon - at - 4);
      what = what.substr(colon + 2);
    } else if (const auto p = what.find("parse error"); p != std::string::npos) {
      what = what.substr(p);
    }
    for (char& c : what) {
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';  // keep the message valid UTF-8
    }
    throw InputError(file, location, "invalid JSON: " + what);
  }
}

Json read_json_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw InputError(path, "", "no such file");
  if (fs::is_directory(st)) throw InputError(path, "", "is a directory, expected a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot be read");
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  if (text.size() > kMaxFileBytes) throw InputError(path, "", "larger than 256 MiB, expected a JSON file");
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
  if (v == nullptr) fail(key, "missing; expected " + want);
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
  if (v == nullptr) fail(key, "missing; expected " + want);
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
  if (v == nullptr) fail(key, "missing; expected a string");
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
