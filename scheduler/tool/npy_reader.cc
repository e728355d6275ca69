#include "scheduler/tool/npy_reader.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace prescient::scheduler::tool {
namespace {

// The value of `key` in the header's Python dict literal, as text.
std::string DictValue(const std::string& header, const std::string& key) {
  const std::size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  std::size_t v = header.find(':', k);
  if (v == std::string::npos) return {};
  ++v;
  while (v < header.size() && header[v] == ' ') ++v;
  if (v < header.size() && header[v] == '(') {
    const std::size_t close = header.find(')', v);
    return close == std::string::npos ? std::string() : header.substr(v, close - v + 1);
  }
  std::size_t end = v;
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  std::string value = header.substr(v, end - v);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

}  // namespace

NpyReader::NpyReader(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) Fail(std::string("cannot open: ") + std::strerror(errno));
  unsigned char magic[8];
  if (std::fread(magic, 1, 8, file_) != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    Fail("not a NumPy .npy file");
  }
  const unsigned major = magic[6];
  std::uint32_t header_len = 0;
  if (major == 1) {
    unsigned char len[2];
    if (std::fread(len, 1, 2, file_) != 2) Fail("truncated header");
    header_len = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (std::fread(len, 1, 4, file_) != 4) Fail("truncated header");
    header_len =
        len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<std::uint32_t>(len[3]) << 24);
  } else {
    Fail(".npy format version " + std::to_string(major) + " (this reads 1 to 3)");
  }
  if (header_len > (1u << 24)) Fail("header too large");
  std::string header(header_len, '\0');
  if (std::fread(header.data(), 1, header_len, file_) != header_len) Fail("truncated header");

  std::string descr = DictValue(header, "descr");
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) {
    Fail("no dtype in the header");
  }
  descr_ = descr.substr(1, descr.size() - 2);
  if (descr_.size() < 3) Fail("dtype '" + descr_ + "'");
  const char order = descr_[0], kind = descr_[1];
  width_ = static_cast<unsigned>(std::atoi(descr_.c_str() + 2));
  if (kind != 'i' && kind != 'u') {
    Fail("dtype '" + descr_ + "': sample ids must be integers (int8..int64, uint8..uint64)");
  }
  if (width_ != 1 && width_ != 2 && width_ != 4 && width_ != 8) Fail("dtype '" + descr_ + "'");
  if (order == '>' && width_ > 1) {
    Fail("dtype '" + descr_ + "' is big-endian: save it with arr.astype('<i8')");
  }
  is_signed_ = kind == 'i';
  if (DictValue(header, "fortran_order") != "False") {
    Fail("Fortran-ordered array: save np.ascontiguousarray(arr)");
  }
  const std::string shape = DictValue(header, "shape");
  if (shape.size() < 2) Fail("no shape in the header");
  std::size_t at = 1;
  while (at < shape.size() - 1) {
    while (at < shape.size() && (shape[at] == ' ' || shape[at] == ',')) ++at;
    if (at >= shape.size() - 1) break;
    char* end = nullptr;
    const unsigned long long dim = std::strtoull(shape.c_str() + at, &end, 10);
    if (end == shape.c_str() + at) Fail("bad shape " + shape);
    shape_.push_back(dim);
    at = static_cast<std::size_t>(end - shape.c_str());
  }
  remaining_ = size();
}

NpyReader::~NpyReader() {
  if (file_ != nullptr) std::fclose(file_);
}

std::uint64_t NpyReader::size() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape_) {
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / d) {
      throw std::runtime_error(path_ + ": shape too large");
    }
    n *= d;
  }
  return n;
}

void NpyReader::Read(std::span<std::int64_t> out) {
  if (out.size() > remaining_) Fail("asked for more elements than the array holds");
  buffer_.resize(out.size() * width_);
  if (!buffer_.empty() && std::fread(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    Fail("shorter than its shape says");
  }
  remaining_ -= out.size();
  const unsigned char* p = buffer_.data();
  for (std::int64_t& v : out) {
    std::uint64_t raw = 0;
    for (unsigned b = 0; b < width_; ++b) raw |= static_cast<std::uint64_t>(p[b]) << (8 * b);
    p += width_;
    if (is_signed_ && width_ < 8 && (raw >> (8 * width_ - 1)) != 0) {
      raw |= ~std::uint64_t{0} << (8 * width_);  // sign-extend
    }
    if (!is_signed_ && raw > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      Fail("a value above 2^63 - 1");
    }
    v = static_cast<std::int64_t>(raw);
  }
}

void NpyReader::Fail(const std::string& what) const {
  throw std::runtime_error("'" + path_ + "': " + what);
}

}  // namespace prescient::scheduler::tool
