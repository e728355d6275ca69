// Reads NumPy .npy files of integers (format versions 1-3, C order, little
// endian or single-byte, signed or unsigned, 1 to 8 bytes per element),
// streaming: the data is converted chunk by chunk, never held whole.
#ifndef PRESCIENT_SCHEDULER_TOOL_NPY_READER_H_
#define PRESCIENT_SCHEDULER_TOOL_NPY_READER_H_

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace prescient::scheduler::tool {

class NpyReader {
 public:
  // Throws std::runtime_error naming the file on anything it cannot read
  // (not .npy, a float or object array, big-endian, Fortran order, short).
  explicit NpyReader(const std::string& path);
  ~NpyReader();
  NpyReader(const NpyReader&) = delete;
  NpyReader& operator=(const NpyReader&) = delete;

  const std::vector<std::uint64_t>& shape() const { return shape_; }
  std::uint64_t size() const;  // product of the shape
  const std::string& descr() const { return descr_; }

  // The next out.size() elements in C order, as signed 64-bit values (an
  // unsigned value above INT64_MAX is an error).
  void Read(std::span<std::int64_t> out);

 private:
  [[noreturn]] void Fail(const std::string& what) const;

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<std::uint64_t> shape_;
  std::string descr_;
  bool is_signed_ = true;
  unsigned width_ = 8;
  std::uint64_t remaining_ = 0;
  std::vector<unsigned char> buffer_;
};

}  // namespace prescient::scheduler::tool

#endif  // PRESCIENT_SCHEDULER_TOOL_NPY_READER_H_
