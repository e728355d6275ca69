// dataset_cls: identifying datasets as they open, the read hook, and marking
// datasets changed when they are written or resized through the connector.
#include <span>
#include <vector>

#include "vol/follow/read_recorder.h"
#include "vol/native_connector.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/object.h"
#include "vol/objects/object_file.h"
#include "vol/passthrough/callbacks.h"
#include "vol/passthrough/forwarding.h"
#include "vol/read/read_hook.h"
#include "vol/runtime/error.h"
#include "vol/runtime/runtime.h"
#include "vol/serve/cache_client.h"

namespace prescient::vol {
namespace {

void MarkChanged(void* obj) {
  VolObject* dataset = VolObject::From(obj);
  if (dataset != nullptr && dataset->dataset) dataset->dataset->MarkChanged();
}

// One entry per dataset of an H5Dread_multi/H5Dwrite_multi array, held inline
// for the single dataset h5py passes per call: the hot read path allocates
// nothing for it. Not copyable (data() may point into the object).
template <typename T>
class PerDataset {
 public:
  explicit PerDataset(size_t count) {
    if (count > 1) many_.resize(count);
    data_ = count > 1 ? many_.data() : &one_;
    size_ = count;
  }
  PerDataset(const PerDataset&) = delete;
  PerDataset& operator=(const PerDataset&) = delete;
  T* data() { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  std::span<T> all() { return {data_, size_}; }

 private:
  T one_{};
  std::vector<T> many_;
  T* data_ = nullptr;
  size_t size_ = 0;
};

// The under objects of an H5Dread_multi/H5Dwrite_multi array.
void UnderObjects(size_t count, void* dset[], PerDataset<void*>& under, hid_t* under_vol_id) {
  for (size_t i = 0; i < count; ++i) {
    VolObject* object = VolObject::From(dset[i]);
    under[i] = object->under;
    *under_vol_id = object->under_vol_id;
  }
}

// Forwards the datasets of a read that were not served (`records[i].served`
// false; all of them when `records` is empty, the cache off) to the connector
// underneath, as one call: an H5Dread_multi of which some datasets were
// served from the cache forwards the others as a smaller H5Dread_multi.
herr_t ForwardReads(size_t count, size_t served, std::span<const ReadRecord> records, void* dset[],
                    hid_t mem_type_id[], hid_t mem_space_id[], hid_t file_space_id[], hid_t dxpl_id,
                    void* buf[], void** req) {
  const size_t left = count - served;
  PerDataset<void*> under(left);
  hid_t under_vol_id = H5I_INVALID_HID;
  // The caller's arrays when nothing was served (the usual forward); else
  // copies of the entries left.
  PerDataset<hid_t> mem_types(served == 0 ? 0 : left);
  PerDataset<hid_t> mem_spaces(served == 0 ? 0 : left);
  PerDataset<hid_t> file_spaces(served == 0 ? 0 : left);
  PerDataset<void*> bufs(served == 0 ? 0 : left);
  size_t k = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!records.empty() && records[i].served) continue;
    const VolObject* object = VolObject::From(dset[i]);
    under[k] = object->under;
    under_vol_id = object->under_vol_id;
    if (served != 0) {
      mem_types[k] = mem_type_id[i];
      mem_spaces[k] = mem_space_id[i];
      file_spaces[k] = file_space_id[i];
      bufs[k] = buf[i];
    }
    ++k;
  }
  hid_t* types = served == 0 ? mem_type_id : mem_types.data();
  hid_t* mem_sp = served == 0 ? mem_space_id : mem_spaces.data();
  hid_t* file_sp = served == 0 ? file_space_id : file_spaces.data();
  void** buffers = served == 0 ? buf : bufs.data();
  const herr_t status = CallNativeOr<PRESCIENT_SLOT(dataset_cls.read)>(
      NativeClassOf(under[0], under_vol_id),
      [&] {
        return H5VLdataset_read(left, under.data(), under_vol_id, types, mem_sp, file_sp, dxpl_id,
                                buffers, req);
      },
      left, under.data(), types, mem_sp, file_sp, dxpl_id, buffers, req);
  if (status >= 0) WrapRequest(req, under_vol_id);
  return status;
}

}  // namespace

// The open or create succeeded: nothing Prescient learns here may fail it.
void AttachDatasetIdentity(VolObject* dataset, bool created_here) noexcept {
  if (dataset == nullptr || !Runtime::Get().enabled()) return;
  try {
    Runtime& runtime = Runtime::Get();
    runtime.stats().Add(Counter::kDatasetsOpened);
    // With the cache off (PRESCIENT_CACHE=0) and no follower, DatasetRead
    // inspects no read, so an identity would be a dozen library calls an open
    // for nothing: a loop of small datasets (read_cost.py --shape
    // small-datasets) spent 7.3% more instructions than native with them, 2.1%
    // without.
    const Options& options = runtime.options();
    if (!options.cache_enabled && !options.follow) return;
    CacheClient& client = CacheClient::Get();
    // A dataset too small to cache is left unidentified: its reads are not
    // looked at, and identifying it would cost more than they do. Asked with
    // the file it was opened through (the object's until resolved).
    if (!created_here && client.TooSmallToCache(*dataset)) {
      dataset->too_small_to_cache = true;
      runtime.stats().Add(Counter::kDatasetsTooSmall);
      return;
    }
    dataset->file = ResolveFile(*dataset, H5I_DATASET);
    dataset->dataset = DatasetState::TryIdentify(*dataset);
    if (created_here) {
      if (dataset->dataset) dataset->dataset->MarkChanged();
      return;
    }
    client.DatasetOpened(*dataset);
  } catch (...) {
    dataset->dataset = nullptr;  // forwarded like any unidentified dataset
  }
}

void* DatasetCreate(void* obj, const H5VL_loc_params_t* loc_params, const char* name, hid_t lcpl_id,
                    hid_t type_id, hid_t space_id, hid_t dcpl_id, hid_t dapl_id, hid_t dxpl_id,
                    void** req) {
  using Forward =
      Forwarder<"dataset_cls.create", H5VLdataset_create, PRESCIENT_SLOT(dataset_cls.create), 2,
                Result::kNewObject, ObjectKind::kDataset, ObjectsAt<0>,
                decltype(H5VL_dataset_class_t::create)>;
  void* dataset = Forward::Call(obj, loc_params, name, lcpl_id, type_id, space_id, dcpl_id, dapl_id,
                                dxpl_id, req);
  AttachDatasetIdentity(VolObject::From(dataset), /*created_here=*/true);
  return dataset;
}

void* DatasetOpen(void* obj, const H5VL_loc_params_t* loc_params, const char* name, hid_t dapl_id,
                  hid_t dxpl_id, void** req) {
  using Forward = Forwarder<"dataset_cls.open", H5VLdataset_open, PRESCIENT_SLOT(dataset_cls.open),
                            2, Result::kNewObject, ObjectKind::kDataset, ObjectsAt<0>,
                            decltype(H5VL_dataset_class_t::open)>;
  void* dataset = Forward::Call(obj, loc_params, name, dapl_id, dxpl_id, req);
  AttachDatasetIdentity(VolObject::From(dataset), /*created_here=*/false);
  return dataset;
}

herr_t DatasetRead(size_t count, void* dset[], hid_t mem_type_id[], hid_t mem_space_id[],
                   hid_t file_space_id[], hid_t dxpl_id, void* buf[], void** req) {
  return Barrier("dataset_cls.read", [&]() -> herr_t {
    Trace("dataset_cls.read");
    Runtime& runtime = Runtime::Get();
    PerDataset<ReadRecord> record_storage(runtime.enabled() ? count : 0);
    std::span<ReadRecord> records = record_storage.all();
    const Options& options = runtime.options();
    // With the cache off (PRESCIENT_CACHE=0) nothing serves a read, so none is
    // inspected (unless the follower learns from it): the connector then costs
    // what its pass-through costs, and its reads are only counted.
    const bool inspect = runtime.enabled() && (options.cache_enabled || options.follow);
    for (size_t i = 0; i < records.size(); ++i) {
      const bool too_small = VolObject::From(dset[i])->too_small_to_cache;
      records[i].inspected = inspect && !too_small;
      if (!records[i].inspected) {
        records[i].forward_reason = inspect ? ForwardReason::kTooSmall : ForwardReason::kCacheOff;
      }
    }
    size_t served = 0;
    if (inspect) {
      if (options.follow) ReadRecorder::BeginAtFirstRead(options.follow_record_pid.value_or(0));
      for (size_t i = 0; i < count; ++i) {
        if (!records[i].inspected) continue;
        const VolObject& dataset = *VolObject::From(dset[i]);
        const ReadRequest request =
            InspectRead(dataset, mem_type_id[i], mem_space_id[i], file_space_id[i], dxpl_id);
        if (ReadRecorder::Active() && request.decoded && !request.selection.scalar &&
            dataset.file && dataset.dataset && !dataset.dataset->dims().empty()) {
          ReadRecorder::Note(dataset.file->name, dataset.dataset->identity().name,
                             dataset.dataset->dims()[0], request.selection.rows);
        }
        ReadRecord& record = records[i];
        record.decoded = request.decoded;
        record.selection = request.selection;
        record.simple = request.simple;
        record.narrow_row_part = request.narrow_row_part;
        record.transfer_forwarded = request.transfer != TransferVerdict::kServable;
        record.bytes = request.bytes;
        record.forward_reason = request.not_simple;
        // An asynchronous read is the connector underneath's to complete
        // (an event set waits on its request): never served.
        if (request.simple && req != nullptr) record.forward_reason = ForwardReason::kAsync;
        if (request.written) {
          runtime.Fallback(Counter::kFallbackWritten,
                           "a dataset written or resized through this process (" +
                               dataset.dataset->identity().description +
                               ") is read through another handle: its reads are forwarded, never "
                               "served from the cache");
        }
        // Each dataset of an H5Dread_multi is served on its own (the transfer
        // list asked for nothing collective, or the read would not be
        // simple); the ones not served are forwarded together below.
        if (request.decoded && req == nullptr &&
            CacheClient::Get().TryServe(dataset, request, buf[i], &record)) {
          ++served;
        }
      }
    }
    if (served == count) {  // h5py's one dataset, served: done
      for (const ReadRecord& record : records) runtime.stats().Commit(record);
      return 0;
    }
    const herr_t status = ForwardReads(count, served, records, dset, mem_type_id, mem_space_id,
                                       file_space_id, dxpl_id, buf, req);
    for (const ReadRecord& record : records) {
      runtime.stats().Commit(record);
      if (!record.served) NoteForwarded(record.forward_reason);
    }
    return status;
  });
}

herr_t DatasetWrite(size_t count, void* dset[], hid_t mem_type_id[], hid_t mem_space_id[],
                    hid_t file_space_id[], hid_t dxpl_id, const void* buf[], void** req) {
  return Barrier("dataset_cls.write", [&]() -> herr_t {
    Trace("dataset_cls.write");
    // Marked before the write: a partly failed write has changed data too.
    for (size_t i = 0; i < count; ++i) MarkChanged(dset[i]);
    hid_t under_vol_id = H5I_INVALID_HID;
    PerDataset<void*> under(count);
    UnderObjects(count, dset, under, &under_vol_id);
    const herr_t status = H5VLdataset_write(count, under.data(), under_vol_id, mem_type_id,
                                            mem_space_id, file_space_id, dxpl_id, buf, req);
    if (status >= 0) WrapRequest(req, under_vol_id);
    return status;
  });
}

herr_t DatasetSpecific(void* obj, H5VL_dataset_specific_args_t* args, hid_t dxpl_id, void** req) {
  using Forward =
      Forwarder<"dataset_cls.specific", H5VLdataset_specific, PRESCIENT_SLOT(dataset_cls.specific),
                1, Result::kStatus, ObjectKind::kOther, ObjectsAt<0>,
                decltype(H5VL_dataset_class_t::specific)>;
  if (args->op_type == H5VL_DATASET_SET_EXTENT) MarkChanged(obj);
  return Forward::Call(obj, args, dxpl_id, req);
}

herr_t DatasetOptional(void* obj, H5VL_optional_args_t* args, hid_t dxpl_id, void** req) {
  using Forward =
      Forwarder<"dataset_cls.optional", H5VLdataset_optional, PRESCIENT_SLOT(dataset_cls.optional),
                1, Result::kStatus, ObjectKind::kOther, ObjectsAt<0>,
                decltype(H5VL_dataset_class_t::optional)>;
  // H5Dwrite_chunk writes raw chunks past the read path.
  if (args->op_type == H5VL_NATIVE_DATASET_CHUNK_WRITE) MarkChanged(obj);
  return Forward::Call(obj, args, dxpl_id, req);
}

herr_t DatasetClose(void* dset, hid_t dxpl_id, void** req) {
  using Forward =
      Forwarder<"dataset_cls.close", H5VLdataset_close, PRESCIENT_SLOT(dataset_cls.close), 1,
                Result::kClose, ObjectKind::kOther, ObjectsAt<0>,
                decltype(H5VL_dataset_class_t::close)>;
  return Forward::Call(dset, dxpl_id, req);
}

}  // namespace prescient::vol
