// A stable 128-bit fingerprint of bytes: what dataset identities and cache
// keys are made of.
//
// 64-bit FNV-1a, twice with different offsets (not cryptographic; collisions
// between real datasets are not a concern).
#ifndef PRESCIENT_VOL_OBJECTS_FINGERPRINT_H_
#define PRESCIENT_VOL_OBJECTS_FINGERPRINT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace prescient::vol {

class Fingerprint {
 public:
  void Add(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      a_ = (a_ ^ p[i]) * 0x100000001b3ULL;
      b_ = (b_ ^ p[i]) * 0x100000001b3ULL;
      b_ ^= b_ >> 29;
    }
  }
  template <typename T>
  void AddValue(const T& value) {
    Add(&value, sizeof(value));
  }
  // The length first, so that ("ab", "c") and ("a", "bc") differ.
  void AddString(std::string_view text) {
    AddValue(static_cast<std::uint64_t>(text.size()));
    Add(text.data(), text.size());
  }
  std::array<std::uint64_t, 2> Finish() const { return {a_, b_}; }

 private:
  std::uint64_t a_ = 0xcbf29ce484222325ULL;
  std::uint64_t b_ = 0x84222325cbf29ce4ULL;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_FINGERPRINT_H_
