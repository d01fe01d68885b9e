#include "cli/gzip_stream.h"

#include "sim/error.h"

namespace trainsim::cli {

GzipStreambuf::GzipStreambuf(const std::string& path) : path_(path), in_(1 << 16), out_(1 << 16) {
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) throw InputError(path, "", "cannot be written");
  // windowBits 15 + 16: a gzip wrapper (zlib manual, deflateInit2); level 6 is zlib's default.
  if (deflateInit2(&zs_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    std::fclose(file_);
    throw InputError(path, "", "cannot start the gzip compressor");
  }
  setp(in_.data(), in_.data() + in_.size());
}

GzipStreambuf::~GzipStreambuf() {
  if (file_ != nullptr) {
    deflateEnd(&zs_);
    std::fclose(file_);
  }
}

void GzipStreambuf::deflate_input(int flush) {
  zs_.next_in = reinterpret_cast<Bytef*>(pbase());
  zs_.avail_in = static_cast<uInt>(pptr() - pbase());
  do {
    zs_.next_out = reinterpret_cast<Bytef*>(out_.data());
    zs_.avail_out = static_cast<uInt>(out_.size());
    deflate(&zs_, flush);
    const std::size_t have = out_.size() - zs_.avail_out;
    if (have > 0 && std::fwrite(out_.data(), 1, have, file_) != have) failed_ = true;
  } while (zs_.avail_out == 0 || (flush == Z_FINISH && zs_.avail_in > 0));
  setp(in_.data(), in_.data() + in_.size());
}

GzipStreambuf::int_type GzipStreambuf::overflow(int_type c) {
  deflate_input(Z_NO_FLUSH);
  if (!traits_type::eq_int_type(c, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
  }
  return failed_ ? traits_type::eof() : traits_type::not_eof(c);
}

int GzipStreambuf::sync() { return failed_ ? -1 : 0; }

void GzipStreambuf::finish() {
  if (file_ == nullptr) return;
  deflate_input(Z_FINISH);
  deflateEnd(&zs_);
  if (std::fclose(file_) != 0) failed_ = true;
  file_ = nullptr;
  if (failed_) throw InputError(path_, "", "writing failed (disk full?)");
}

}  // namespace trainsim::cli
