#include "validate/nccl_tests.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "config/json_reader.h"
#include "sim/error.h"

namespace trainsim::validate {

using config::Json;
using sim::CollectiveKind;

double NcclTestsRow::best_time_us() const {
  double t = 0;
  for (const auto& p : {out_of_place, in_place}) {
    if (p && p->time_us > 0 && (t == 0 || p->time_us < t)) t = p->time_us;
  }
  return t;
}

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

bool is_integer(const std::string& s) {
  if (s.empty()) return false;
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// Removes MPI/launcher tags such as "[0] " or "[1,0]<stdout>:" at the start of a line.
std::string strip_tag(const std::string& line) {
  std::size_t i = 0;
  while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  if (i < line.size() && line[i] == '[') {
    const std::size_t close = line.find(']', i);
    if (close != std::string::npos) {
      std::size_t j = close + 1;
      const std::string tag = "<stdout>:";
      if (line.compare(j, tag.size(), tag) == 0) j += tag.size();
      bool tag_like = true;
      for (std::size_t k = i + 1; k < close; ++k) {
        const char ch = line[k];
        if (!std::isdigit(static_cast<unsigned char>(ch)) && ch != ',') tag_like = false;
      }
      if (tag_like) return line.substr(j);
    }
  }
  return line;
}

[[noreturn]] void fail_line(const std::string& file, int line, const std::string& what) {
  throw InputError(file, "line " + std::to_string(line), what);
}

// A thread or GPU count from the header ("nThread 1 nGpus 8"): 0 when it is not a number of at
// most six digits (the header is informative; the table decides).
int small_count(const std::string& tok) {
  if (!is_integer(tok) || tok.size() > 6) return 0;
  return std::max(0, std::stoi(tok));
}

double number(const std::string& tok, const std::string& file, int line,
              const std::string& column) {
  if (tok == "N/A" || tok == "nan" || tok == "-nan") return 0;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(tok, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != tok.size() || !std::isfinite(v)) {
    fail_line(file, line, "expected a number in column '" + column + "', got '" + tok + "'");
  }
  return v;
}

struct Columns {
  int size = -1, count = -1, type = -1, redop = -1;
  std::vector<int> time, algbw, busbw;  // one entry per placement: out-of-place, in-place
  int tokens = 0;                       // tokens a data row has
};

// Reads the column-name header ("# size count type redop [root] time algbw busbw #wrong ...").
Columns read_header(const std::vector<std::string>& names) {
  Columns c;
  int pos = 0;
  for (const std::string& name : names) {
    if (name == "size") c.size = pos;
    if (name == "count") c.count = pos;
    if (name == "type") c.type = pos;
    if (name == "redop") c.redop = pos;
    if (name == "time" || name == "cputime") c.time.push_back(pos);
    if (name == "algbw") c.algbw.push_back(pos);
    if (name == "busbw") c.busbw.push_back(pos);
    pos += name == "timestamp" ? 2 : 1;  // "%Y-%m-%d %H:%M:%S" is two tokens
  }
  c.tokens = pos;
  return c;
}

NcclTestsLog parse_text(const std::string& content, const std::string& file) {
  NcclTestsLog log;
  log.file = file;
  std::istringstream in(content);
  std::string raw;
  int line_no = 0;
  std::optional<Columns> cols;
  while (std::getline(in, raw)) {
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string line = strip_tag(raw);
    const std::vector<std::string> tok = split(line);
    if (tok.empty()) continue;
    // Pasted logs sometimes lose the leading '#' of the preamble lines.
    if (tok.size() >= 4 && tok[0] == "nThread" && tok[2] == "nGpus") {
      log.threads = small_count(tok[1]);
      log.gpus_per_thread = small_count(tok[3]);
      continue;
    }
    if (tok.size() >= 3 && tok[0] == "Rank" && is_integer(tok[1]) &&
        (tok[2] == "Group" || tok[2] == "Pid")) {
      ++log.ranks;
      continue;
    }
    if (tok[0][0] == '#') {
      std::vector<std::string> words = tok;
      if (words[0] == "#") {
        words.erase(words.begin());
      } else {
        words[0] = words[0].substr(1);
      }
      if (words.empty()) continue;
      if (words.size() >= 4 && words[0] == "Collective" && words[1] == "test" &&
          words[2] == "starting:") {
        log.test = words[3];
      } else if (words[0] == "nThread" && words.size() >= 4 && words[2] == "nGpus") {
        log.threads = small_count(words[1]);
        log.gpus_per_thread = small_count(words[3]);
      } else if (words[0] == "Rank" && words.size() >= 2 && is_integer(words[1])) {
        ++log.ranks;
      } else if (words[0] == "size" &&
                 std::find(words.begin(), words.end(), "count") != words.end()) {
        Columns c = read_header(words);
        if (c.size < 0 || c.count < 0 || c.time.empty() || c.algbw.size() != c.time.size() ||
            c.busbw.size() != c.time.size()) {
          fail_line(file, line_no,
                    "unrecognised nccl-tests table header (expected size, count, type, time, "
                    "algbw, busbw)");
        }
        cols = c;
      }
      continue;
    }
    if (!cols || !is_integer(tok[0])) continue;  // NCCL INFO lines, launcher noise
    const Columns& c = *cols;
    if (static_cast<int>(tok.size()) != c.tokens) {
      fail_line(file, line_no,
                "expected " + std::to_string(c.tokens) + " columns as in the table header, got " +
                    std::to_string(tok.size()));
    }
    NcclTestsRow row;
    row.line = line_no;
    const double size = number(tok[static_cast<std::size_t>(c.size)], file, line_no, "size");
    const double count = number(tok[static_cast<std::size_t>(c.count)], file, line_no, "count");
    // Both become int64: bounded as the -J JSON reader bounds them (2^62).
    if (size < 0 || count < 0 || size > 4.6e18 || count > 4.6e18)
      fail_line(file, line_no, "expected a non-negative size and count below 2^62");
    row.bytes = static_cast<std::int64_t>(size);
    row.count = static_cast<std::int64_t>(count);
    if (c.type >= 0) row.type = tok[static_cast<std::size_t>(c.type)];
    if (c.redop >= 0) row.redop = tok[static_cast<std::size_t>(c.redop)];
    for (std::size_t k = 0; k < c.time.size(); ++k) {
      NcclTestsPlacement p;
      p.time_us = number(tok[static_cast<std::size_t>(c.time[k])], file, line_no, "time");
      p.algbw_GBps = number(tok[static_cast<std::size_t>(c.algbw[k])], file, line_no, "algbw");
      p.busbw_GBps = number(tok[static_cast<std::size_t>(c.busbw[k])], file, line_no, "busbw");
      if (p.time_us < 0 || p.algbw_GBps < 0 || p.busbw_GBps < 0)
        fail_line(file, line_no, "expected non-negative times and bandwidths");
      (k == 0 ? row.out_of_place : row.in_place) = p;
    }
    if (row.bytes > 0 && row.best_time_us() <= 0)
      fail_line(file, line_no, "expected a positive time for a non-empty message");
    log.rows.push_back(row);
  }
  if (!cols) {
    throw InputError(file, "",
                     "no nccl-tests result table: expected a header line '#  size  count  type ... "
                     "time  algbw  busbw'");
  }
  if (log.rows.empty()) throw InputError(file, "", "the nccl-tests table has no result rows");
  return log;
}

NcclTestsPlacement read_placement(const Json& v, const std::string& file, const std::string& path) {
  config::ObjectReader r(v, file, path);
  r.allow({"nwrong"});
  NcclTestsPlacement p;
  auto value = [&](const std::string& key) {
    const Json* x = r.raw(key);
    if (x != nullptr && x->is_string() && (*x == "nan" || *x == "-nan")) return 0.0;
    return r.require_double(key, 0, 1e18);
  };
  p.time_us = r.has("cpu_time") ? value("cpu_time") : value("time");
  p.algbw_GBps = value("alg_bw");
  p.busbw_GBps = value("bus_bw");
  // Per-iteration statistics (-I) are documentation here.
  for (const auto& [key, unused] : v.items()) {
    if (key != "time" && key != "cpu_time" && key != "alg_bw" && key != "bus_bw" && key != "nwrong")
      r.allow({key.c_str()});
  }
  r.finish();
  return p;
}

NcclTestsLog parse_json(const std::string& content, const std::string& file) {
  const Json doc = config::parse_json_text(content, file);
  if (!doc.is_object()) throw InputError(file, "", "expected an nccl-tests -J JSON object");
  NcclTestsLog log;
  log.file = file;
  if (doc.contains("config") && doc["config"].is_object()) {
    const Json& c = doc["config"];
    if (c.contains("nthreads") && c["nthreads"].is_number_integer())
      log.threads = c["nthreads"].get<int>();
    if (c.contains("ngpus") && c["ngpus"].is_number_integer())
      log.gpus_per_thread = c["ngpus"].get<int>();
  }
  if (doc.contains("devices") && doc["devices"].is_array())
    log.ranks = static_cast<int>(doc["devices"].size());
  if (doc.contains("args") && doc["args"].is_array() && !doc["args"].empty() &&
      doc["args"][0].is_string()) {
    std::string prog = doc["args"][0].get<std::string>();
    const std::size_t slash = prog.find_last_of('/');
    log.test = slash == std::string::npos ? prog : prog.substr(slash + 1);
  }
  if (!doc.contains("results") || !doc["results"].is_array()) {
    throw InputError(file, "/results", "expected the array of results nccl-tests -J writes");
  }
  const Json& results = doc["results"];
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::string path = config::join_path("/results", i);
    config::ObjectReader r(results[i], file, path);
    r.allow({"root", "actual_iterations", "experiment_name", "type", "redop"});
    NcclTestsRow row;
    row.bytes = r.require_int("size", 0, std::int64_t{1} << 62);
    row.count = r.require_int("count", 0, std::int64_t{1} << 62);
    row.type = r.get_string("type", "");
    row.redop = r.get_string("redop", "");
    for (const char* key : {"out_of_place", "in_place"}) {
      const Json* p = r.raw(key);
      if (p == nullptr || p->is_null()) continue;
      (std::string(key) == "out_of_place" ? row.out_of_place : row.in_place) =
          read_placement(*p, file, config::join_path(path, key));
    }
    r.finish();
    if (row.bytes > 0 && row.best_time_us() <= 0) {
      throw InputError(file, path, "expected a positive time for a non-empty message");
    }
    log.rows.push_back(row);
  }
  if (log.rows.empty()) throw InputError(file, "/results", "the nccl-tests results are empty");
  return log;
}

}  // namespace

NcclTestsLog parse_nccl_tests(const std::string& content, const std::string& file) {
  std::size_t i = 0;
  while (i < content.size() && std::isspace(static_cast<unsigned char>(content[i]))) ++i;
  if (i < content.size() && content[i] == '{') return parse_json(content, file);
  return parse_text(content, file);
}

NcclTestsLog read_nccl_tests(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot be read (missing file or no permission)");
  // nccl-tests logs are kilobytes; stop at 64 MiB so that /dev/zero or a wrong file is an error.
  constexpr std::size_t kMaxBytes = std::size_t{64} << 20;
  std::string content;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    content.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (content.size() > kMaxBytes) throw InputError(path, "", "larger than 64 MiB: not an nccl-tests log");
  }
  if (in.bad()) throw InputError(path, "", "cannot be read");
  return parse_nccl_tests(content, path);
}

std::optional<CollectiveKind> collective_of_test(const std::string& name, const std::string& file,
                                                 bool* p2p) {
  std::string n = name;
  const std::string suffix = "_perf";
  if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
    n.resize(n.size() - suffix.size());
  }
  std::string key;
  for (char ch : n) {
    if (ch != '_' && ch != '-')
      key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  static const std::map<std::string, CollectiveKind> kinds = {
      {"allreduce", CollectiveKind::kAllReduce},
      {"allgather", CollectiveKind::kAllGather},
      {"reducescatter", CollectiveKind::kReduceScatter},
      {"broadcast", CollectiveKind::kBroadcast},
      {"reduce", CollectiveKind::kReduce},
      {"alltoall", CollectiveKind::kAllToAll}};
  if (p2p != nullptr) *p2p = false;
  if (key == "sendrecv") {
    if (p2p != nullptr) *p2p = true;
    return std::nullopt;
  }
  auto it = kinds.find(key);
  if (it == kinds.end()) {
    throw InputError(file, "",
                     "unknown collective '" + name +
                         "': expected all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                         "alltoall or sendrecv");
  }
  return it->second;
}

double nccl_tests_bus_factor(std::optional<CollectiveKind> kind, int ranks) {
  return kind ? topo::CollectiveModel::bus_factor(*kind, ranks) : 1.0;
}

std::vector<NcclComparisonRow> compare_nccl_tests(const NcclTestsLog& log,
                                                  const topo::ClusterSpec& cluster,
                                                  const topo::GroupShape& shape,
                                                  std::optional<CollectiveKind> kind,
                                                  int gpus_per_thread) {
  const topo::CollectiveModel model(cluster);
  const topo::NcclTopology topology = model.topology(shape);
  const double factor = nccl_tests_bus_factor(kind, shape.ranks);
  std::vector<NcclComparisonRow> out;
  for (const NcclTestsRow& row : log.rows) {
    if (row.bytes <= 0) continue;
    const sim::Bytes bytes(row.bytes);
    topo::CollectivePrediction p;
    if (kind) {
      p = model.predict(*kind, bytes, topology, gpus_per_thread);
    } else {
      p = model.predict_p2p(bytes, shape.nodes == 1);
      p.time_us = std::max(p.time_us, gpus_per_thread * cluster.nccl.launch_us);
    }
    NcclComparisonRow c;
    c.bytes = row.bytes;
    c.measured_time_us = row.best_time_us();
    c.predicted_time_us = p.time_us;
    const double b = static_cast<double>(row.bytes);
    c.measured_busbw_GBps = b / (c.measured_time_us * 1e3) * factor;
    c.predicted_busbw_GBps = b / (c.predicted_time_us * 1e3) * factor;
    c.time_error = (c.predicted_time_us - c.measured_time_us) / c.measured_time_us;
    c.busbw_error = c.measured_busbw_GBps > 0
                        ? (c.predicted_busbw_GBps - c.measured_busbw_GBps) / c.measured_busbw_GBps
                        : 0;
    c.algorithm = p.algorithm;
    c.protocol = p.protocol;
    out.push_back(c);
  }
  return out;
}

}  // namespace trainsim::validate
