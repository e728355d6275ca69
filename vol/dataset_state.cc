#include "vol/dataset_state.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include "vol/error.h"
#include "vol/file_state.h"

namespace prescient::vol {
namespace {

// Datasets changed through this process, by (device, inode, token).
using ChangedKey =
    std::tuple<std::uint64_t, std::uint64_t, std::array<std::uint8_t, H5O_MAX_TOKEN_SIZE>>;
std::mutex g_changed_mutex;
std::set<ChangedKey>& ChangedSet() {
  static auto* set = new std::set<ChangedKey>;
  return *set;
}

// 64-bit FNV-1a, twice with different offsets: a stable 128-bit fingerprint
// (not cryptographic; collisions between real datasets are not a concern).
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
  std::array<std::uint64_t, 2> Finish() const { return {a_, b_}; }

 private:
  std::uint64_t a_ = 0xcbf29ce484222325ULL;
  std::uint64_t b_ = 0x84222325cbf29ce4ULL;
};

bool HasVariableParts(hid_t type) {
  return H5Tdetect_class(type, H5T_VLEN) > 0 || H5Tdetect_class(type, H5T_REFERENCE) > 0 ||
         H5Tis_variable_str(type) > 0;
}

// Runs a dataset 'get' on the under connector; returns the hid it yields.
hid_t UnderDatasetGet(const VolObject& dataset, H5VL_dataset_get_t op) {
  H5VL_dataset_get_args_t args{};
  args.op_type = op;
  args.args.get_space.space_id = H5I_INVALID_HID;  // same layout for get_type
  if (H5VLdataset_get(dataset.under, dataset.under_vol_id, &args, H5P_DATASET_XFER_DEFAULT,
                      nullptr) < 0) {
    return H5I_INVALID_HID;
  }
  return op == H5VL_DATASET_GET_SPACE ? args.args.get_space.space_id : args.args.get_type.type_id;
}

bool UnderToken(const VolObject& dataset, H5O_token_t* token) {
  H5O_info2_t info{};
  H5VL_loc_params_t loc{};
  loc.type = H5VL_OBJECT_BY_SELF;
  loc.obj_type = H5I_DATASET;
  H5VL_object_get_args_t args{};
  args.op_type = H5VL_OBJECT_GET_INFO;
  args.args.get_info.fields = H5O_INFO_BASIC;
  args.args.get_info.oinfo = &info;
  if (H5VLobject_get(dataset.under, &loc, dataset.under_vol_id, &args, H5P_DATASET_XFER_DEFAULT,
                     nullptr) < 0) {
    return false;
  }
  *token = info.token;
  return true;
}

}  // namespace

std::shared_ptr<DatasetState> DatasetState::Identify(const VolObject& dataset) {
  // Failed queries must not leave errors behind a successful open.
  PreservedErrorStack keep;
  std::shared_ptr<DatasetState> state(new DatasetState);
  const hid_t space = UnderDatasetGet(dataset, H5VL_DATASET_GET_SPACE);
  if (space < 0) return nullptr;
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank >= 0) {
    state->dims_.resize(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space, state->dims_.data(), nullptr);
  }
  const H5S_class_t space_class = H5Sget_simple_extent_type(space);
  H5Sclose(space);
  if (rank < 0 || space_class == H5S_NO_CLASS) return nullptr;

  state->file_type_ = UnderDatasetGet(dataset, H5VL_DATASET_GET_TYPE);
  if (state->file_type_ < 0) return nullptr;
  state->type_size_ = H5Tget_size(state->file_type_);
  state->fixed_size_ = !HasVariableParts(state->file_type_);
  std::uint64_t row_elements = 1;
  for (std::size_t d = 1; d < state->dims_.size(); ++d) row_elements *= state->dims_[d];
  state->row_bytes_ = row_elements * state->type_size_;

  H5O_token_t token{};
  if (!UnderToken(dataset, &token)) return nullptr;

  DatasetIdentity& id = state->identity_;
  std::memcpy(id.token.data(), token.__data, H5O_MAX_TOKEN_SIZE);
  Fingerprint fp;
  if (dataset.file) {
    const FileIdentity& f = dataset.file->identity;
    id.file_device = f.device;
    id.file_inode = f.inode;
    for (std::uint64_t v : {f.device, f.inode, f.size, static_cast<std::uint64_t>(f.mtime_ns)})
      fp.AddValue(v);
  }
  fp.Add(id.token.data(), id.token.size());
  for (hsize_t d : state->dims_) fp.AddValue(static_cast<std::uint64_t>(d));
  std::size_t encoded_size = 0;
  if (H5Tencode(state->file_type_, nullptr, &encoded_size) >= 0 && encoded_size > 0) {
    std::vector<unsigned char> encoded(encoded_size);
    if (H5Tencode(state->file_type_, encoded.data(), &encoded_size) >= 0)
      fp.Add(encoded.data(), encoded_size);
  }
  id.hash = fp.Finish();

  std::ostringstream desc;
  desc << (dataset.file ? dataset.file->name : "?") << " shape (";
  for (std::size_t d = 0; d < state->dims_.size(); ++d) desc << (d ? "," : "") << state->dims_[d];
  desc << ") type size " << state->type_size_;
  id.description = desc.str();
  return state;
}

std::shared_ptr<DatasetState> DatasetState::TryIdentify(const VolObject& dataset) noexcept {
  try {
    return Identify(dataset);
  } catch (...) {
    return nullptr;
  }
}

DatasetState::~DatasetState() {
  if (file_type_ >= 0) {
    PreservedErrorStack keep;
    H5Tclose(file_type_);
  }
}

void DatasetState::MarkChanged() noexcept {
  changed_.store(true, std::memory_order_relaxed);
  try {
    std::lock_guard lock(g_changed_mutex);
    ChangedSet().emplace(identity_.file_device, identity_.file_inode, identity_.token);
  } catch (...) {
    // Out of memory: this handle still knows; other handles may not.
  }
}

bool DatasetState::changed() const {
  if (changed_.load(std::memory_order_relaxed)) return true;
  std::lock_guard lock(g_changed_mutex);
  if (ChangedSet().count({identity_.file_device, identity_.file_inode, identity_.token}) == 0)
    return false;
  changed_.store(true, std::memory_order_relaxed);
  return true;
}

}  // namespace prescient::vol
