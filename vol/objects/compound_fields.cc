#include "vol/objects/compound_fields.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace prescient::vol {
namespace {

// A type id closed when it goes out of scope.
class TypeId {
 public:
  explicit TypeId(hid_t id) : id_(id) {}
  TypeId(const TypeId&) = delete;
  TypeId& operator=(const TypeId&) = delete;
  ~TypeId() {
    if (id_ >= 0) H5Tclose(id_);
  }
  hid_t get() const { return id_; }

 private:
  hid_t id_;
};

// The index in `stored` of the member named as member `index` of `memory`,
// or -1.
int StoredIndexOf(hid_t memory, unsigned index, hid_t stored) {
  char* name = H5Tget_member_name(memory, index);
  if (name == nullptr) return -1;
  const int found = H5Tget_member_index(stored, name);
  H5free_memory(name);
  return found;
}

}  // namespace

bool ReadsAsStored(hid_t memory, hid_t stored) {
  // Equal types convert by HDF5's no-op path.
  if (H5Tequal(memory, stored) > 0) return true;
  // An enum read as integers (h5py reads enum members and datasets as their
  // base integers): HDF5 converts each value to the memory type through the
  // enum's base type, a no-op where the two are equal.
  if (H5Tget_class(stored) != H5T_ENUM || H5Tget_class(memory) != H5T_INTEGER) return false;
  const TypeId base(H5Tget_super(stored));
  return base.get() >= 0 && H5Tequal(memory, base.get()) > 0;
}

std::optional<CompoundFields> CompoundFields::Plan(hid_t memory, hid_t stored) {
  if (H5Tget_class(memory) != H5T_COMPOUND || H5Tget_class(stored) != H5T_COMPOUND) {
    return std::nullopt;
  }
  const int members = H5Tget_nmembers(memory);
  if (members <= 0) return std::nullopt;
  std::vector<Copy> copies;
  copies.reserve(static_cast<std::size_t>(members));
  for (unsigned i = 0; i < static_cast<unsigned>(members); ++i) {
    // A member the stored type lacks keeps the caller's bytes (HDF5's
    // background buffer): HDF5's to convert.
    const int j = StoredIndexOf(memory, i, stored);
    if (j < 0) return std::nullopt;
    const TypeId memory_member(H5Tget_member_type(memory, i));
    const TypeId stored_member(H5Tget_member_type(stored, static_cast<unsigned>(j)));
    if (memory_member.get() < 0 || stored_member.get() < 0) return std::nullopt;
    if (!ReadsAsStored(memory_member.get(), stored_member.get())) return std::nullopt;
    const std::size_t bytes = H5Tget_size(memory_member.get());
    const std::size_t to = H5Tget_member_offset(memory, i);
    const std::size_t from = H5Tget_member_offset(stored, static_cast<unsigned>(j));
    if (bytes == 0 || bytes > UINT32_MAX || to > UINT32_MAX || from > UINT32_MAX) {
      return std::nullopt;
    }
    copies.push_back({.from = static_cast<std::uint32_t>(from),
                      .to = static_cast<std::uint32_t>(to),
                      .bytes = static_cast<std::uint32_t>(bytes)});
  }
  return FromCopies(std::move(copies), H5Tget_size(stored), H5Tget_size(memory));
}

std::optional<CompoundFields> CompoundFields::FromCopies(std::vector<Copy> copies,
                                                         std::size_t stored_size,
                                                         std::size_t memory_size) {
  if (copies.empty() || stored_size == 0 || memory_size == 0) return std::nullopt;
  std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) { return a.to < b.to; });
  // Every byte of a memory element written once: bytes between members
  // would be whatever HDF5's conversion buffer held.
  std::size_t covered = 0;
  for (const Copy& c : copies) {
    if (c.to != covered || std::size_t{c.from} + c.bytes > stored_size) return std::nullopt;
    covered += c.bytes;
  }
  if (covered != memory_size) return std::nullopt;
  CompoundFields fields;
  fields.stored_size_ = stored_size;
  fields.memory_size_ = memory_size;
  for (const Copy& c : copies) {
    Copy* last = fields.copies_.empty() ? nullptr : &fields.copies_.back();
    if (last != nullptr && last->from + last->bytes == c.from) {
      last->bytes += c.bytes;  // adjacent in both: one copy
    } else {
      fields.copies_.push_back(c);
    }
  }
  return fields;
}

void CompoundFields::Gather(const std::byte* stored, std::byte* out,
                            std::uint64_t elements) const noexcept {
  if (copies_.size() == 1) {  // one member, or a run of adjacent ones
    const Copy c = copies_.front();
    for (std::uint64_t e = 0; e < elements; ++e) {
      std::memcpy(out + e * memory_size_, stored + e * stored_size_ + c.from, c.bytes);
    }
    return;
  }
  for (std::uint64_t e = 0; e < elements; ++e) {
    const std::byte* from = stored + e * stored_size_;
    std::byte* to = out + e * memory_size_;
    for (const Copy& c : copies_) std::memcpy(to + c.to, from + c.from, c.bytes);
  }
}

}  // namespace prescient::vol
