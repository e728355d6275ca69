#include "vol/objects/dataset_state.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "vol/objects/file_state.h"
#include "vol/objects/fingerprint.h"
#include "vol/objects/written_datasets.h"
#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

bool HasVariableParts(hid_t type) {
  return H5Tdetect_class(type, H5T_VLEN) > 0 || H5Tdetect_class(type, H5T_REFERENCE) > 0 ||
         H5Tis_variable_str(type) > 0;
}

}  // namespace

std::shared_ptr<DatasetState> DatasetState::Identify(const VolObject& dataset) {
  return Identify(UnderDataset(dataset), dataset.file.get());
}

std::shared_ptr<DatasetState> DatasetState::Identify(const DatasetQueries& dataset,
                                                     const FileState* file) {
  // Failed queries must not leave errors behind a successful open.
  PreservedErrorStack keep;
  std::shared_ptr<DatasetState> state(new DatasetState);
  static std::atomic<std::uint64_t> opens{0};
  state->open_serial_ = opens.fetch_add(1, std::memory_order_relaxed) + 1;
  const hid_t space = dataset.Space();
  if (space < 0) return nullptr;
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank >= 0) {
    state->dims_.resize(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space, state->dims_.data(), nullptr);
  }
  const H5S_class_t space_class = H5Sget_simple_extent_type(space);
  H5Sclose(space);
  if (rank < 0 || space_class == H5S_NO_CLASS) return nullptr;

  // The stored type is kept as a transient copy decoded from its encoding:
  // the id H5Dget_type gives belongs to the file, and h5py's File.close()
  // closes every id of the file (H5Fget_obj_ids), ours included.
  {
    const hid_t stored = dataset.Type();
    if (stored < 0) return nullptr;
    // Asked twice: given a buffer that is large enough, H5Tencode does not
    // say how much of it the encoding used.
    std::size_t encoded_size = 0;
    if (H5Tencode(stored, nullptr, &encoded_size) >= 0 && encoded_size > 0) {
      state->encoded_type_.resize(encoded_size);
      if (H5Tencode(stored, state->encoded_type_.data(), &encoded_size) < 0)
        state->encoded_type_.clear();
    }
    state->type_class_ = H5Tget_class(stored);
    state->type_size_ = H5Tget_size(stored);
    // Integers and floats have no variable parts (three library calls saved
    // per open of a dataset).
    state->fixed_size_ = state->type_class_ == H5T_INTEGER || state->type_class_ == H5T_FLOAT ||
                         !HasVariableParts(stored);
    H5Tclose(stored);
  }
  if (state->encoded_type_.empty() || state->type_size_ == 0) return nullptr;
  std::uint64_t row_elements = 1;
  for (std::size_t d = 1; d < state->dims_.size(); ++d) row_elements *= state->dims_[d];
  state->row_bytes_ = row_elements * state->type_size_;

  H5O_token_t token{};
  if (!dataset.Token(&token)) return nullptr;

  DatasetIdentity& id = state->identity_;
  std::memcpy(id.token.data(), token.__data, H5O_MAX_TOKEN_SIZE);
  id.name = dataset.Name();
  Fingerprint fp;
  if (file != nullptr) {
    const FileIdentity& f = file->identity;
    id.file_device = f.device;
    id.file_inode = f.inode;
    if (f.valid) id.file_ctime_ns = f.ctime_ns;
    for (std::uint64_t v : {f.device, f.inode, f.size, static_cast<std::uint64_t>(f.mtime_ns),
                            static_cast<std::uint64_t>(f.ctime_ns)}) {
      fp.AddValue(v);
    }
  }
  fp.Add(id.token.data(), id.token.size());
  for (hsize_t d : state->dims_) fp.AddValue(static_cast<std::uint64_t>(d));
  fp.Add(state->encoded_type_.data(), state->encoded_type_.size());
  id.hash = fp.Finish();

  std::string& desc = id.description;  // appended: an ostringstream costs more than the rest
  desc = file != nullptr ? file->name : "?";
  desc += ':';
  desc += id.name.empty() ? "?" : id.name;
  desc += " shape (";
  for (std::size_t d = 0; d < state->dims_.size(); ++d) {
    if (d != 0) desc += ',';
    desc += std::to_string(state->dims_[d]);
  }
  desc += ") type size ";
  desc += std::to_string(state->type_size_);
  return state;
}

std::shared_ptr<DatasetState> DatasetState::TryIdentify(const VolObject& dataset) noexcept {
  try {
    return Identify(dataset);
  } catch (...) {
    return nullptr;
  }
}

DatasetState::AtomicProperties DatasetState::AtomicProperties::Of(hid_t type,
                                                                  H5T_class_t type_class) {
  AtomicProperties p;
  if (type_class != H5T_INTEGER && type_class != H5T_FLOAT) return p;
  p.order = H5Tget_order(type);
  p.precision = H5Tget_precision(type);
  p.offset = H5Tget_offset(type);
  H5Tget_pad(type, &p.lsb, &p.msb);
  if (type_class == H5T_INTEGER) {
    p.sign = H5Tget_sign(type);
  } else {
    H5Tget_fields(type, &p.fields[0], &p.fields[1], &p.fields[2], &p.fields[3], &p.fields[4]);
    p.ebias = H5Tget_ebias(type);
    p.norm = H5Tget_norm(type);
    p.inpad = H5Tget_inpad(type);
  }
  return p;
}

bool DatasetState::IsStoredType(hid_t mem_type) const {
  const int k = PredefinedTypeIndex(mem_type);
  if (k < 0) {
    int equivalent = equivalent_predefined_.load(std::memory_order_relaxed);
    if (equivalent == kNotLooked) {
      equivalent = EquivalentPredefinedType(encoded_type_);
      equivalent_predefined_.store(equivalent, std::memory_order_relaxed);
    }
    if (equivalent >= 0 && H5Tequal(mem_type, PredefinedTypeId(equivalent)) > 0) return true;
    return CompareWithStoredType(mem_type);
  }
  std::atomic<std::uint8_t>& verdict = predefined_verdict_[static_cast<std::size_t>(k)];
  const std::uint8_t known = verdict.load(std::memory_order_relaxed);
  if (known != kUnknown) return known == kStored;
  const bool stored = CompareWithStoredType(mem_type);
  verdict.store(stored ? kStored : kOther, std::memory_order_relaxed);
  return stored;
}

bool DatasetState::CompareWithStoredType(hid_t mem_type) const {
  const H5T_class_t mem_class = H5Tget_class(mem_type);
  const bool enum_as_integers = type_class_ == H5T_ENUM && mem_class == H5T_INTEGER;
  if ((mem_class != type_class_ && !enum_as_integers) || H5Tget_size(mem_type) != type_size_)
    return false;
  if (type_class_ == H5T_INTEGER || type_class_ == H5T_FLOAT) {
    return AtomicProperties::Of(mem_type, type_class_) == StoredAtomicProperties();
  }
  // Other classes (compound, enum, array, ...): a decoded copy and H5Tequal;
  // an enum read as its base integers returns the stored bytes too.
  const hid_t stored = NewStoredTypeId();
  if (stored < 0) return false;
  const bool equal = ReadsAsStored(mem_type, stored);
  H5Tclose(stored);
  return equal;
}

const DatasetState::AtomicProperties& DatasetState::StoredAtomicProperties() const {
  std::call_once(atomic_once_, [this] {
    // Undecodable: the defaults (error orders) equal no memory type's.
    const hid_t stored = NewStoredTypeId();
    if (stored < 0) return;
    atomic_ = AtomicProperties::Of(stored, type_class_);
    H5Tclose(stored);
  });
  return atomic_;
}

hid_t DatasetState::NewStoredTypeId() const {
  return hdf5::DecodeType(encoded_type_.data(), encoded_type_.size());
}

std::shared_ptr<const CompoundFields> DatasetState::FieldsOf(hid_t mem_type) const {
  if (type_class_ != H5T_COMPOUND || H5Tget_class(mem_type) != H5T_COMPOUND) return nullptr;
  std::vector<unsigned char> encoded;
  std::size_t size = 0;
  if (H5Tencode(mem_type, nullptr, &size) < 0 || size == 0) return nullptr;
  encoded.resize(size);
  if (H5Tencode(mem_type, encoded.data(), &size) < 0) return nullptr;
  {
    cache::MutexLock lock(&fields_mu_);
    for (const FieldsVerdict& verdict : fields_verdicts_) {
      if (verdict.memory_type == encoded) return verdict.fields;
    }
  }
  std::shared_ptr<const CompoundFields> fields;
  const hid_t stored = NewStoredTypeId();
  if (stored >= 0) {
    std::optional<CompoundFields> plan;
    {
      // A failed query (a member name the stored type lacks) is an answer:
      // nothing printed, no error left behind the read.
      PreservedErrorStack keep;
      QuietErrorPrinting quiet;
      plan = CompoundFields::Plan(mem_type, stored);
    }
    H5Tclose(stored);
    if (plan) fields = std::make_shared<const CompoundFields>(std::move(*plan));
  }
  cache::MutexLock lock(&fields_mu_);
  if (fields_verdicts_.size() < kMaxFieldsVerdicts) {
    fields_verdicts_.push_back({std::move(encoded), fields});
  }
  return fields;
}

void DatasetState::MarkChanged() noexcept {
  changed_.store(true, std::memory_order_relaxed);
  WrittenDatasets::Note(identity_);
}

bool DatasetState::changed() const {
  if (changed_.load(std::memory_order_relaxed)) return true;
  if (!WrittenDatasets::Contains(identity_)) return false;
  // This handle shares the open the dataset was changed through: for good.
  changed_.store(true, std::memory_order_relaxed);
  return true;
}

}  // namespace prescient::vol
