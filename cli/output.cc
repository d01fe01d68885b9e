#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/gzip_stream.h"
#include "sim/error.h"

namespace trainsim::cli {

void check_jobs(const char* option, int jobs) {
  if (jobs < 0 || jobs > kMaxThreads) {
    throw InputError("command line", option,
                     "expected 0 (one per CPU) to " + std::to_string(kMaxThreads) + ", got " + std::to_string(jobs));
  }
}

void write_output(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path == "-") {
    write(std::cout);
    std::cout.flush();
    return;
  }
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    GzipStreambuf buffer(path);
    std::ostream out(&buffer);
    write(out);
    out.flush();
    buffer.finish();
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path, "", "cannot be written");
  write(out);
  out.flush();
  if (!out) throw InputError(path, "", "writing failed (disk full?)");
}

}  // namespace trainsim::cli
