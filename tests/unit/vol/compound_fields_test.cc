// CompoundFields: a memory type of some members of a stored compound is served
// as copies of those members only where HDF5's conversion is exactly such a
// copy (vol/objects/compound_fields.h). The bytes themselves are compared with
// HDF5's own conversion here, and with native reads in
// tests/python/vol/test_vol_compound_fields.py.
#include "vol/objects/compound_fields.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

namespace prescient::vol {
namespace {

using Copy = CompoundFields::Copy;

// A compound type built member by member; closed at the end of the test.
class Compound {
 public:
  explicit Compound(std::size_t size) : id_(H5Tcreate(H5T_COMPOUND, size)) {}
  ~Compound() { H5Tclose(id_); }
  Compound& Add(const char* name, std::size_t offset, hid_t type) {
    EXPECT_GE(H5Tinsert(id_, name, offset, type), 0) << name;
    return *this;
  }
  hid_t id() const { return id_; }

 private:
  hid_t id_;
};

// A stored element of 24 bytes: a (int32 @0), b (double @8), c (char[3] @16),
// padding after it.
Compound Stored(hid_t string3) {
  Compound stored(24);
  stored.Add("a", 0, H5T_STD_I32LE).Add("b", 8, H5T_IEEE_F64LE).Add("c", 16, string3);
  return stored;
}

hid_t String3() {
  const hid_t s = H5Tcopy(H5T_C_S1);
  H5Tset_size(s, 3);
  return s;
}

// What HDF5's own conversion makes of `elements` stored elements.
std::vector<std::byte> ConvertedByHdf5(hid_t stored, hid_t memory, const std::vector<std::byte>& in,
                                       std::size_t elements) {
  const std::size_t stored_size = H5Tget_size(stored), memory_size = H5Tget_size(memory);
  std::vector<std::byte> buf(elements * std::max(stored_size, memory_size));
  std::memcpy(buf.data(), in.data(), in.size());
  std::vector<std::byte> background(elements * std::max(stored_size, memory_size));
  EXPECT_GE(H5Tconvert(stored, memory, elements, buf.data(), background.data(), H5P_DEFAULT), 0);
  buf.resize(elements * memory_size);
  return buf;
}

std::vector<std::byte> Pattern(std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>(i * 37 + 11);
  return out;
}

TEST(CompoundFields, SomeMembersInAnotherOrderAreCopiesOfThemEqualToHdf5sConversion) {
  const hid_t s3 = String3();
  Compound stored = Stored(s3);
  Compound memory(11);  // c, a: packed, in another order
  memory.Add("c", 0, s3).Add("b", 3, H5T_IEEE_F64LE);
  std::optional<CompoundFields> fields = CompoundFields::Plan(memory.id(), stored.id());
  ASSERT_TRUE(fields.has_value());
  EXPECT_EQ(fields->stored_size(), 24u);
  EXPECT_EQ(fields->memory_size(), 11u);
  EXPECT_EQ(fields->copies(), (std::vector<Copy>{{.from = 16, .to = 0, .bytes = 3},
                                                 {.from = 8, .to = 3, .bytes = 8}}));
  const std::size_t elements = 5;
  const std::vector<std::byte> in = Pattern(elements * 24);
  std::vector<std::byte> out(elements * 11);
  fields->Gather(in.data(), out.data(), elements);
  EXPECT_EQ(out, ConvertedByHdf5(stored.id(), memory.id(), in, elements));
  H5Tclose(s3);
}

TEST(CompoundFields, MembersAdjacentInBothAreOneCopy) {
  const hid_t s3 = String3();
  Compound stored = Stored(s3);
  Compound memory(8);
  memory.Add("a", 0, H5T_STD_I32LE);
  Compound wider(4 + 8 + 3);  // stored a and b are not adjacent (padding at 4): two copies
  wider.Add("a", 0, H5T_STD_I32LE).Add("b", 4, H5T_IEEE_F64LE).Add("c", 12, s3);
  EXPECT_FALSE(CompoundFields::Plan(memory.id(), stored.id()).has_value())
      << "a memory element of 8 bytes with 4 written leaves padding to HDF5";
  std::optional<CompoundFields> fields = CompoundFields::Plan(wider.id(), stored.id());
  ASSERT_TRUE(fields.has_value());
  EXPECT_EQ(fields->copies().size(), 2u);  // a; then b and c, adjacent at 8..19 and 4..15
  const std::vector<std::byte> in = Pattern(3 * 24);
  std::vector<std::byte> out(3 * 15);
  fields->Gather(in.data(), out.data(), 3);
  EXPECT_EQ(out, ConvertedByHdf5(stored.id(), wider.id(), in, 3));
  H5Tclose(s3);
}

TEST(CompoundFields, ConversionsAreLeftToHdf5) {
  const hid_t s3 = String3();
  Compound stored = Stored(s3);
  Compound converted(8);  // b as float: converted
  converted.Add("b", 0, H5T_IEEE_F32LE).Add("a", 4, H5T_STD_I32LE);
  EXPECT_FALSE(CompoundFields::Plan(converted.id(), stored.id()).has_value());
  Compound big_endian(4);
  big_endian.Add("a", 0, H5T_STD_I32BE);
  EXPECT_FALSE(CompoundFields::Plan(big_endian.id(), stored.id()).has_value());
  Compound missing(8);  // a member the file lacks keeps the caller's bytes
  missing.Add("a", 0, H5T_STD_I32LE).Add("z", 4, H5T_STD_I32LE);
  EXPECT_FALSE(CompoundFields::Plan(missing.id(), stored.id()).has_value());
  Compound padded(16);  // aligned: bytes 4..7 belong to no member
  padded.Add("a", 0, H5T_STD_I32LE).Add("b", 8, H5T_IEEE_F64LE);
  EXPECT_FALSE(CompoundFields::Plan(padded.id(), stored.id()).has_value());
  EXPECT_FALSE(CompoundFields::Plan(H5T_STD_I32LE, stored.id()).has_value());
  EXPECT_FALSE(CompoundFields::Plan(padded.id(), H5T_STD_I32LE).has_value());
  H5Tclose(s3);
}

TEST(CompoundFields, NestedAndArrayMembersCompareWhole) {
  Compound inner(3);
  inner.Add("x", 0, H5T_STD_I16LE).Add("y", 2, H5T_STD_U8LE);
  const hsize_t three = 3;
  const hid_t vec = H5Tarray_create2(H5T_IEEE_F32LE, 1, &three);
  Compound stored(3 + 12 + 4);
  stored.Add("n", 0, inner.id()).Add("v", 3, vec).Add("k", 15, H5T_STD_I32LE);
  Compound memory(15);
  memory.Add("v", 0, vec).Add("n", 12, inner.id());
  std::optional<CompoundFields> fields = CompoundFields::Plan(memory.id(), stored.id());
  ASSERT_TRUE(fields.has_value());
  const std::vector<std::byte> in = Pattern(4 * 19);
  std::vector<std::byte> out(4 * 15);
  fields->Gather(in.data(), out.data(), 4);
  EXPECT_EQ(out, ConvertedByHdf5(stored.id(), memory.id(), in, 4));
  Compound fewer_inner(2);  // a nested compound of fewer members is not the stored member
  fewer_inner.Add("x", 0, H5T_STD_I16LE);
  Compound partial(2);
  partial.Add("n", 0, fewer_inner.id());
  EXPECT_FALSE(CompoundFields::Plan(partial.id(), stored.id()).has_value());
  H5Tclose(vec);
}

TEST(CompoundFields, AnEnumReadAsItsBaseIntegersReadsAsStored) {
  const hid_t label = H5Tenum_create(H5T_STD_I8LE);
  const std::pair<const char*, signed char> members[] = {{"b", 5}, {"c", 4}, {"light", 0}};
  for (const auto& [name, value] : members) ASSERT_GE(H5Tenum_insert(label, name, &value), 0);
  EXPECT_TRUE(ReadsAsStored(H5T_NATIVE_SCHAR, label));
  EXPECT_TRUE(ReadsAsStored(label, label));
  EXPECT_FALSE(ReadsAsStored(H5T_STD_I16LE, label)) << "another integer: converted";
  EXPECT_FALSE(ReadsAsStored(label, H5T_STD_I8LE)) << "integers read as an enum: mapped";
  Compound stored(5);
  stored.Add("x", 0, H5T_IEEE_F32LE).Add("label", 4, label);
  Compound memory(1);
  memory.Add("label", 0, H5T_STD_I8LE);
  std::optional<CompoundFields> fields = CompoundFields::Plan(memory.id(), stored.id());
  ASSERT_TRUE(fields.has_value());
  // Values of the enum and one that is none of its members (7): HDF5 converts
  // the values through the base type, without looking them up.
  std::vector<std::byte> in = Pattern(3 * 5);
  for (int e = 0; e < 3; ++e) in[e * 5 + 4] = static_cast<std::byte>(e == 0 ? 5 : e == 1 ? 4 : 7);
  std::vector<std::byte> out(3);
  fields->Gather(in.data(), out.data(), 3);
  EXPECT_EQ(out, ConvertedByHdf5(stored.id(), memory.id(), in, 3));
  H5Tclose(label);
}

TEST(CompoundFields, CopiesMustCoverTheMemoryElementOnceInsideTheStoredOne) {
  EXPECT_TRUE(CompoundFields::FromCopies({{.from = 4, .to = 0, .bytes = 4}}, 8, 4).has_value());
  EXPECT_FALSE(CompoundFields::FromCopies({{.from = 6, .to = 0, .bytes = 4}}, 8, 4).has_value())
      << "reads past the stored element";
  EXPECT_FALSE(CompoundFields::FromCopies(
                   {{.from = 0, .to = 0, .bytes = 4}, {.from = 2, .to = 2, .bytes = 4}}, 8, 6)
                   .has_value())
      << "overlapping members";
  EXPECT_FALSE(CompoundFields::FromCopies({}, 8, 4).has_value());
  EXPECT_FALSE(CompoundFields::FromCopies({{.from = 0, .to = 0, .bytes = 4}}, 8, 5).has_value());
}

}  // namespace
}  // namespace prescient::vol
