// A read of some members of a dataset's compound type (h5py's `d["x"]`,
// `d.fields([...])`, `read_direct` into a structured array of fewer fields),
// served from the stored rows.
//
// HDF5 converts such a read member by member, matching members by name. Where
// every member of the memory type is a member of the stored type that reads
// as stored (an equal type, or the base integer of a stored enum:
// ReadsAsStored), and the members cover the memory type's every byte, the conversion is
// a copy of each member from its stored offset to its memory offset: the
// result does not depend on the background buffer HDF5 may keep, and the
// connector can serve the read from whole stored rows, then gather the
// members. Any other memory type (a member of another type, a member the
// stored type does not have, padding between members) is HDF5's to convert.
#ifndef PRESCIENT_VOL_OBJECTS_COMPOUND_FIELDS_H_
#define PRESCIENT_VOL_OBJECTS_COMPOUND_FIELDS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "vol/hdf5_compat.h"

namespace prescient::vol {

// Whether HDF5 reads elements of `stored` into `memory` as the stored bytes:
// the types are equal (HDF5's no-op conversion), or `stored` is an enum and
// `memory` its base integer type (HDF5 converts each value through the base
// type: a no-op). The caller holds HDF5's lock.
bool ReadsAsStored(hid_t memory, hid_t stored);

class CompoundFields {
 public:
  // One copy per element: `bytes` from offset `from` of a stored element to
  // offset `to` of a memory element. Members adjacent in both are one copy.
  struct Copy {
    std::uint32_t from = 0;
    std::uint32_t to = 0;
    std::uint32_t bytes = 0;
    bool operator==(const Copy&) const = default;
  };

  // The copies that turn elements of `stored` into elements of `memory`, or
  // nothing when HDF5's conversion is not such a copy (see above). Both are
  // type ids; the caller holds HDF5's lock.
  static std::optional<CompoundFields> Plan(hid_t memory, hid_t stored);

  // From the copies directly (tests): nothing unless they cover every byte of
  // a memory element exactly once and read inside a stored element.
  static std::optional<CompoundFields> FromCopies(std::vector<Copy> copies, std::size_t stored_size,
                                                  std::size_t memory_size);

  std::size_t stored_size() const { return stored_size_; }
  std::size_t memory_size() const { return memory_size_; }
  const std::vector<Copy>& copies() const { return copies_; }

  // `elements` stored elements at `stored` become memory elements at `out`.
  void Gather(const std::byte* stored, std::byte* out, std::uint64_t elements) const noexcept;

 private:
  CompoundFields() = default;
  std::vector<Copy> copies_;
  std::size_t stored_size_ = 0;
  std::size_t memory_size_ = 0;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_COMPOUND_FIELDS_H_
