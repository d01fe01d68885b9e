// The bad-input corpus (tests/bad_inputs/cases.json): every input a user can type ends in a
// result (exit 0) or a clear error (exit 2) naming the file and the JSON path or line, never in
// a crash, a sanitizer report, an internal error or a hang (each case is killed after 60 s;
// README "Input limits" has the measured times).

#include <doctest/doctest.h>
#include <string>
#include <vector>

#include "tests/bad_inputs/bad_input_cases.h"
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

tests::ProcessOutcome run(const std::vector<std::string>& args) {
  std::string cmd = "cd ";
  cmd.append(quote(kFolder)).append(" && timeout 60 ").append(quote(TRAINSIM_BINARY));
  for (const std::string& a : args) cmd.append(" ").append(quote(a));
  return tests::run_command(cmd.append(" 2>&1"));
}

void check_cases(int exit_code) {
  int checked = 0;
  for (const tests::BadInputCase& c : tests::read_bad_input_cases(kFolder + "/cases.json")) {
    if (c.exit_code != exit_code) continue;
#ifdef TRAINSIM_SANITIZED
    if (c.heavy) continue;  // minutes and gigabytes under ASan
#endif
    CAPTURE(c.id);
    const tests::ProcessOutcome o = run(c.args);
    CAPTURE(o.output);
    CHECK(o.code == exit_code);
    for (const std::string& fragment : c.expect) CHECK(o.output.find(fragment) != std::string::npos);
    if (exit_code == 2 && c.args.front() == "run") CHECK(o.output.find("trainsim: error: ") != std::string::npos);
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
