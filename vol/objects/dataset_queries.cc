#include "vol/objects/dataset_queries.h"

#include "vol/hdf5_ids.h"
#include "vol/native_connector.h"
#include "vol/objects/name_query.h"

namespace prescient::vol {
namespace {

// H5VLdataset_get, H5VLdataset_optional and H5VLobject_get of the dataset,
// with the native connector's callbacks called directly (native_connector.h).
herr_t GetFromDataset(const VolObject& dataset, H5VL_dataset_get_args_t* args) {
  const hid_t dxpl = hdf5::DefaultTransferList();
  return CallNativeOr<PRESCIENT_SLOT(dataset_cls.get)>(
      NativeClassOf(dataset.under, dataset.under_vol_id),
      [&] { return H5VLdataset_get(dataset.under, dataset.under_vol_id, args, dxpl, nullptr); },
      dataset.under, args, dxpl, nullptr);
}

herr_t DatasetOptional(const VolObject& dataset, H5VL_optional_args_t* args) {
  const hid_t dxpl = hdf5::DefaultTransferList();
  return CallNativeOr<PRESCIENT_SLOT(dataset_cls.optional)>(
      NativeClassOf(dataset.under, dataset.under_vol_id),
      [&] {
        return H5VLdataset_optional(dataset.under, dataset.under_vol_id, args, dxpl, nullptr);
      },
      dataset.under, args, dxpl, nullptr);
}

herr_t GetFromObject(const VolObject& dataset, const H5VL_loc_params_t* loc,
                     H5VL_object_get_args_t* args) {
  const hid_t dxpl = hdf5::DefaultTransferList();
  return CallNativeOr<PRESCIENT_SLOT(object_cls.get)>(
      NativeClassOf(dataset.under, dataset.under_vol_id),
      [&] { return H5VLobject_get(dataset.under, loc, dataset.under_vol_id, args, dxpl, nullptr); },
      dataset.under, loc, args, dxpl, nullptr);
}

hid_t UnderDatasetGet(const VolObject& dataset, H5VL_dataset_get_t op) {
  H5VL_dataset_get_args_t args{};
  args.op_type = op;
  args.args.get_space.space_id = H5I_INVALID_HID;  // same layout for get_type and get_dcpl
  if (GetFromDataset(dataset, &args) < 0) return H5I_INVALID_HID;
  switch (op) {
    case H5VL_DATASET_GET_SPACE:
      return args.args.get_space.space_id;
    case H5VL_DATASET_GET_TYPE:
      return args.args.get_type.type_id;
    case H5VL_DATASET_GET_DCPL:
      return args.args.get_dcpl.dcpl_id;
    case H5VL_DATASET_GET_DAPL:
      return args.args.get_dapl.dapl_id;
    default:
      return H5I_INVALID_HID;
  }
}

herr_t NativeDatasetOptional(const VolObject& dataset, int op,
                             H5VL_native_dataset_optional_args_t* args) {
  H5VL_optional_args_t optional{op, args};
  return DatasetOptional(dataset, &optional);
}

H5VL_loc_params_t Self() {
  H5VL_loc_params_t loc{};
  loc.type = H5VL_OBJECT_BY_SELF;
  loc.obj_type = H5I_DATASET;
  return loc;
}

}  // namespace

hid_t UnderDataset::Space() const { return UnderDatasetGet(dataset_, H5VL_DATASET_GET_SPACE); }
hid_t UnderDataset::Type() const { return UnderDatasetGet(dataset_, H5VL_DATASET_GET_TYPE); }
hid_t UnderDataset::CreationPlist() const {
  return UnderDatasetGet(dataset_, H5VL_DATASET_GET_DCPL);
}

hid_t UnderDataset::AccessPlist() const { return UnderDatasetGet(dataset_, H5VL_DATASET_GET_DAPL); }

bool UnderDataset::Token(H5O_token_t* token) const {
  H5O_info2_t info{};
  H5VL_loc_params_t loc = Self();
  H5VL_object_get_args_t args{};
  args.op_type = H5VL_OBJECT_GET_INFO;
  args.args.get_info.fields = H5O_INFO_BASIC;
  args.args.get_info.oinfo = &info;
  if (GetFromObject(dataset_, &loc, &args) < 0) return false;
  *token = info.token;
  return true;
}

std::string UnderDataset::Name() const {
  H5VL_loc_params_t loc = Self();
  return QueryName([&](char* buffer, std::size_t size, std::size_t* length) {
           H5VL_object_get_args_t args{};
           args.op_type = H5VL_OBJECT_GET_NAME;
           args.args.get_name.buf_size = size;
           args.args.get_name.buf = buffer;
           args.args.get_name.name_len = length;
           return GetFromObject(dataset_, &loc, &args) >= 0;
         })
      .value_or(std::string());
}

bool UnderDataset::Native() const {
  H5VL_class_value_t value = -1;
  return H5VLget_value(dataset_.under_vol_id, &value) >= 0 && value == H5_VOL_NATIVE;
}

haddr_t UnderDataset::Offset() const {
  haddr_t address = HADDR_UNDEF;
  H5VL_native_dataset_optional_args_t args{};
  args.get_offset.offset = &address;
  if (NativeDatasetOptional(dataset_, H5VL_NATIVE_DATASET_GET_OFFSET, &args) < 0)
    return HADDR_UNDEF;
  return address;
}

std::optional<std::uint64_t> UnderDataset::StorageSize() const {
  hsize_t size = 0;
  H5VL_dataset_get_args_t args{};
  args.op_type = H5VL_DATASET_GET_STORAGE_SIZE;
  args.args.get_storage_size.storage_size = &size;
  if (GetFromDataset(dataset_, &args) < 0) return std::nullopt;
  return size;
}

herr_t UnderDataset::ChunkIter(H5D_chunk_iter_op_t op, void* data) const {
  H5VL_native_dataset_optional_args_t args{};
  args.chunk_iter.op = op;
  args.chunk_iter.op_data = data;
  return NativeDatasetOptional(dataset_, H5VL_NATIVE_DATASET_CHUNK_ITER, &args);
}

std::optional<std::uint64_t> PublicDataset::StorageSize() const {
  // H5Dget_storage_size cannot tell a failure from an empty dataset: the
  // error stack can.
  const hssize_t errors = H5Eget_num(H5E_DEFAULT);
  const hsize_t size = H5Dget_storage_size(dataset_);
  if (size == 0 && H5Eget_num(H5E_DEFAULT) > errors) return std::nullopt;
  return size;
}

bool PublicDataset::Token(H5O_token_t* token) const {
  H5O_info2_t info{};
  if (H5Oget_info3(dataset_, &info, H5O_INFO_BASIC) < 0) return false;
  *token = info.token;
  return true;
}

std::string PublicDataset::Name() const {
  const ssize_t length = H5Iget_name(dataset_, nullptr, 0);
  if (length <= 0) return {};
  std::string name(static_cast<std::size_t>(length) + 1, '\0');
  if (H5Iget_name(dataset_, name.data(), name.size()) < 0) return {};
  name.resize(static_cast<std::size_t>(length));
  return name;
}

bool PublicDataset::Native() const {
  H5VL_class_value_t value = -1;
  const hid_t connector = H5VLget_connector_id(dataset_);
  if (connector < 0) return false;
  const bool native = H5VLget_value(connector, &value) >= 0 && value == H5_VOL_NATIVE;
  H5VLclose(connector);
  return native;
}

}  // namespace prescient::vol
