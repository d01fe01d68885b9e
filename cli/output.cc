#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "sim/error.h"

namespace trainsim::cli {

void write_output(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path == "-") {
    write(std::cout);
    std::cout.flush();
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path, "", "cannot be written");
  write(out);
  out.flush();
  if (!out) throw InputError(path, "", "writing failed (disk full?)");
}

}  // namespace trainsim::cli
