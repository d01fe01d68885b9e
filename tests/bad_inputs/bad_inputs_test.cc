// The bad-input corpus (tests/bad_inputs/cases.json): every input a user can type ends in a
// result (exit 0) or a clear error (exit 2) naming the file and the JSON path or line, never in
// a crash, a sanitizer report, an internal error or a hang (each case is killed after 60 s;
// README "Input limits" has the measured times).

#include <doctest/doctest.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/process.h"

namespace {

const std::string kFolder = std::string(TRAINSIM_SOURCE_DIR) + "/tests/bad_inputs";

std::string quote(const std::string& arg) {
  std::string out;
  out.push_back('\'');
  for (char c : arg) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

// %XX escapes carry bytes the JSON manifest cannot hold (invalid UTF-8).
std::string percent_decode(const std::string& s) {
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

tests::ProcessOutcome run(const std::vector<std::string>& args) {
  std::string cmd = "cd ";
  cmd.append(quote(kFolder)).append(" && timeout 60 ").append(quote(TRAINSIM_BINARY));
  for (const std::string& a : args) cmd.append(" ").append(quote(a));
  return tests::run_command(cmd.append(" 2>&1"));
}

nlohmann::json cases() {
  std::ifstream in(kFolder + "/cases.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str())["cases"];
}

void check_cases(int exit_code) {
  int checked = 0;
  for (const nlohmann::json& c : cases()) {
    if (c["exit"].get<int>() != exit_code) continue;
#ifdef TRAINSIM_SANITIZED
    if (c.value("heavy", false)) continue;  // minutes and gigabytes under ASan
#endif
    const std::string id = c["id"].get<std::string>();
    CAPTURE(id);
    std::vector<std::string> args;
    for (const auto& a : c["args"]) {
      args.push_back(c.value("percent_decode", false) ? percent_decode(a.get<std::string>()) : a.get<std::string>());
    }
    const tests::ProcessOutcome o = run(args);
    CAPTURE(o.output);
    CHECK(o.code == exit_code);
    for (const auto& fragment : c["expect"]) CHECK(o.output.find(fragment.get<std::string>()) != std::string::npos);
    if (exit_code == 2 && args.front() == "run") CHECK(o.output.find("trainsim: error: ") != std::string::npos);
    CHECK(o.output.find("internal error") == std::string::npos);
    CHECK(o.output.find("runtime error") == std::string::npos);
    CHECK(o.output.find("Sanitizer") == std::string::npos);
    ++checked;
  }
  CHECK(checked > 0);
}

}  // namespace

TEST_CASE("bad inputs: every bad input exits 2 naming the file and the JSON path or line") { check_cases(2); }

TEST_CASE("bad inputs: extreme but valid inputs give results") { check_cases(0); }
