#pragma once
// The bad-input corpus (cases.json in this folder), read for the test and for
// bench_extreme_inputs: each case is a trainsim command line run in this folder, the exit code it
// must end with, and fragments its output must contain.

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace tests {

struct BadInputCase {
  std::string id;
  std::vector<std::string> args;  // after the binary; %XX already decoded where the case asks
  int exit_code = 2;
  std::vector<std::string> expect;
  bool heavy = false;  // seconds and gigabytes: skipped under sanitizers
};

inline std::string percent_decode(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

inline std::vector<BadInputCase> read_bad_input_cases(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str());
  std::vector<BadInputCase> out;
  for (const nlohmann::json& c : doc.at("cases")) {
    BadInputCase bc;
    bc.id = c.at("id").get<std::string>();
    // %XX escapes carry bytes the JSON manifest cannot hold (invalid UTF-8).
    for (const auto& a : c.at("args")) {
      bc.args.push_back(c.value("percent_decode", false) ? percent_decode(a.get<std::string>()) : a.get<std::string>());
    }
    bc.exit_code = c.at("exit").get<int>();
    for (const auto& e : c.at("expect")) bc.expect.push_back(e.get<std::string>());
    bc.heavy = c.value("heavy", false);
    out.push_back(std::move(bc));
  }
  return out;
}

}  // namespace tests
