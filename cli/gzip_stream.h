#pragma once
// GzipStreambuf: a std::streambuf that gzip-compresses (zlib, RFC 1952) what is written to it into
// a file. The gzip header carries no time stamp or file name, so the same bytes in give the same
// file out.

#include <cstdio>
#include <streambuf>
#include <string>
#include <vector>

#include <zlib.h>

namespace trainsim::cli {

class GzipStreambuf : public std::streambuf {
 public:
  // Throws InputError when `path` cannot be opened for writing.
  explicit GzipStreambuf(const std::string& path);
  ~GzipStreambuf() override;
  GzipStreambuf(const GzipStreambuf&) = delete;
  GzipStreambuf& operator=(const GzipStreambuf&) = delete;
  // Flushes the compressor and closes the file. Throws InputError when writing failed.
  void finish();

 protected:
  int_type overflow(int_type c) override;
  int sync() override;

 private:
  void deflate_input(int flush);

  std::string path_;
  std::FILE* file_ = nullptr;
  z_stream zs_{};
  std::vector<char> in_, out_;
  bool failed_ = false;
};

}  // namespace trainsim::cli
