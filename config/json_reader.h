#pragma once
// Reading JSON input with precise errors. A JsonSource is a parsed file (comments allowed).
// An ObjectReader reads one JSON object: every key must be read or declared documentation,
// otherwise finish() rejects it; a value of the wrong type or range is an InputError naming the
// file, the JSON path and what was expected. An object may sit on top of a preset object (keys
// next to "preset" override the preset's); errors then name whichever file the value came from.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/error.h"

namespace trainsim::config {

using Json = nlohmann::json;

// Input limits of every JSON document (README "Input limits"): larger or deeper input is an
// InputError, never a stack overflow or an out-of-memory kill.
constexpr std::size_t kMaxJsonFileBytes = std::size_t{16} << 20;  // scenario, preset, calibration
constexpr int kMaxJsonDepth = 128;

// Reads and parses a JSON file (// and /* */ comments allowed). Throws InputError for a missing
// or unreadable file, a directory, a file larger than `max_bytes` (read no further, so
// /dev/zero is an error too), an empty file, or invalid JSON: syntax errors with line and
// column, invalid UTF-8, nesting deeper than kMaxJsonDepth, and duplicate keys (with the JSON
// path: a key given twice would otherwise silently drop one value).
Json read_json_file(const std::string& path, std::size_t max_bytes = kMaxJsonFileBytes);
// Parses JSON text with the same rules; `file` names it in errors.
Json parse_json_text(const std::string& text, const std::string& file);
// The line where `text` (JSON, comments allowed) first nests deeper than `limit`; 0 if it never
// does. Brackets inside strings and comments do not count.
std::size_t line_nested_deeper_than(const std::string& text, int limit);
// True when `text` is well-formed UTF-8 (command-line strings are not checked by the parser).
bool is_valid_utf8(const std::string& text);

// Child path: "/a" + "b" -> "/a/b" (JSON pointer escaping for ~ and /).
std::string join_path(const std::string& path, const std::string& key);
std::string join_path(const std::string& path, std::size_t index);
// A short rendering of a JSON value for messages.
std::string describe(const Json& v);

class ObjectReader {
 public:
  // REQUIRES: value outlives the reader. Throws InputError unless value is an object.
  ObjectReader(const Json& value, std::string file, std::string path);
  // Layers a preset object under this one: keys missing here are read from it.
  void set_base(const Json& base, std::string file, std::string path);

  bool has(const std::string& key) const;
  // Keys that only document (e.g. "description", "sources"); they are accepted and not read.
  void allow(std::initializer_list<const char*> keys);

  std::int64_t get_int(const std::string& key, std::int64_t fallback, std::int64_t min, std::int64_t max);
  std::int64_t require_int(const std::string& key, std::int64_t min, std::int64_t max);
  std::optional<std::int64_t> get_optional_int(const std::string& key, std::int64_t min, std::int64_t max);
  double get_double(const std::string& key, double fallback, double min, double max);
  double require_double(const std::string& key, double min, double max);
  std::optional<double> get_optional_double(const std::string& key, double min, double max);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  std::string require_string(const std::string& key);
  // One of `choices`; returns its index.
  std::size_t get_choice(const std::string& key, std::size_t fallback, std::initializer_list<const char*> choices);
  // A nested object (layered like this one when both levels have it).
  ObjectReader object(const std::string& key);
  // The raw value (for arrays); nullptr when absent.
  const Json* raw(const std::string& key);

  // Where a key's value comes from, for error messages about it.
  const std::string& file_of(const std::string& key) const;
  std::string path_of(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  // Rejects keys that were neither read nor allowed.
  void finish() const;

 private:
  const Json* lookup(const std::string& key) const;
  // "missing; expected WANT", naming a key of the section that looks like a misspelling of it.
  [[noreturn]] void fail_missing(const std::string& key, const std::string& want) const;
  const Json* value_;
  std::string file_, path_;
  const Json* base_ = nullptr;
  std::string base_file_, base_path_;
  std::set<std::string> used_;
  std::set<std::string> allowed_;
};

}  // namespace trainsim::config
