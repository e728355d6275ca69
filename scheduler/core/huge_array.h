// A fixed-size array of trivially copyable T in anonymous memory that asks
// for transparent huge pages. Next-use tables are hundreds of MiB probed at
// random; with 4 KiB pages nearly every probe also misses the TLB.
#ifndef PRESCIENT_SCHEDULER_CORE_HUGE_ARRAY_H_
#define PRESCIENT_SCHEDULER_CORE_HUGE_ARRAY_H_

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

namespace prescient::scheduler {

template <typename T>
class HugeArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  HugeArray() = default;
  // Zero-filled (fresh anonymous pages). Throws std::bad_alloc.
  explicit HugeArray(std::size_t size) : size_(size) {
    if (size == 0) return;
    bytes_ = size * sizeof(T);
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    ::madvise(p, bytes_, MADV_HUGEPAGE);  // advisory: fine if THP is off
    data_ = static_cast<T*>(p);
  }
  HugeArray(HugeArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  HugeArray& operator=(HugeArray&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  ~HugeArray() { Release(); }

  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return bytes_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  void Release() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_HUGE_ARRAY_H_
