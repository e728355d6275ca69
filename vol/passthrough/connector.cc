// Assembles H5VL_class_t: the generated forwarders from callback_table.def,
// then the hand-written callbacks, and the connector's life cycle.
#include "vol/passthrough/connector.h"

#include "vol/hdf5_ids.h"
#include "vol/native_connector.h"
#include "vol/passthrough/callbacks.h"
#include "vol/passthrough/connector_info.h"
#include "vol/passthrough/forwarding.h"
#include "vol/runtime/error.h"
#include "vol/runtime/process_anchor.h"
#include "vol/runtime/runtime.h"
#include "vol/runtime/trace.h"
#include "vol/serve/cache_client.h"

namespace prescient::vol {
namespace {

H5VL_class_t BuildClass() {
  H5VL_class_t c{};
  c.version = H5VL_VERSION;
  c.value = static_cast<H5VL_class_value_t>(kConnectorValue);
  c.name = kConnectorName;
  c.conn_version = kConnectorVersion;
  c.cap_flags = H5VL_CAP_FLAG_NONE;  // the under connector's flags are reported by get_cap_flags
  c.initialize = &Initialize;
  c.terminate = &Terminate;
  c.info_cls = {sizeof(ConnectorInfo), &InfoCopy,      &InfoCompare, &InfoFree,
                &InfoToString,         &InfoFromString};
  c.wrap_cls = {&GetObject, &GetWrapContext, &WrapObject, &UnwrapObject, &FreeWrapContext};

#define PRESCIENT_FORWARD(slot, fn, id_pos, result, kind, ...)                                   \
  c.slot = &Forwarder<#slot, fn, PRESCIENT_SLOT(slot), id_pos, Result::result, ObjectKind::kind, \
                      ObjectsAt<__VA_ARGS__>, decltype(c.slot)>::Call;
#include "vol/passthrough/callback_table.def"
#undef PRESCIENT_FORWARD

  c.file_cls.create = &FileCreate;
  c.file_cls.open = &FileOpen;
  c.file_cls.specific = &FileSpecific;
  c.file_cls.close = &FileClose;
  c.dataset_cls.create = &DatasetCreate;
  c.dataset_cls.open = &DatasetOpen;
  c.dataset_cls.read = &DatasetRead;
  c.dataset_cls.write = &DatasetWrite;
  c.dataset_cls.specific = &DatasetSpecific;
  c.dataset_cls.optional = &DatasetOptional;
  c.dataset_cls.close = &DatasetClose;
  c.object_cls.open = &ObjectOpen;
  c.link_cls.create = &LinkCreate;
  c.group_cls.specific = &GroupSpecific;
  c.introspect_cls.get_conn_cls = &IntrospectGetConnClass;
  c.introspect_cls.get_cap_flags = &IntrospectGetCapFlags;
  return c;
}

}  // namespace

const H5VL_class_t& ConnectorClass() {
  static const H5VL_class_t cls = BuildClass();
  return cls;
}

herr_t Initialize(hid_t /*vipl_id*/) {
  return Barrier("initialize", []() -> herr_t {
    RecordProcessAnchor();    // forked DataLoader workers inherit whom they work for
    hdf5::ForgetDriverIds();  // a library opened again may number its drivers anew
    ForgetNativeClass();
    RegisterErrorClass();
    return 0;
  });
}

herr_t Terminate() {
  return Barrier("terminate", []() -> herr_t {
    // Rows still waiting for the admission thread are placed (and counted)
    // before the statistics are written for the last time.
    CacheClient::Get().DrainAdmissions();
    Runtime::Get().FlushStats();
    CacheClient::Get().Shutdown();
    UnregisterErrorClass();
    hdf5::ForgetDriverIds();
    ForgetNativeClass();
    return 0;
  });
}

herr_t IntrospectGetConnClass(void* obj, H5VL_get_conn_lvl_t lvl, const H5VL_class_t** conn_cls) {
  return Barrier("introspect_cls.get_conn_cls", [&]() -> herr_t {
    if (lvl == H5VL_GET_CONN_LVL_CURR) {
      *conn_cls = &ConnectorClass();
      return 0;
    }
    const VolObject* object = VolObject::From(obj);
    return H5VLintrospect_get_conn_cls(object->under, object->under_vol_id, lvl, conn_cls);
  });
}

herr_t IntrospectGetCapFlags(const void* info, uint64_t* cap_flags) {
  return Barrier("introspect_cls.get_cap_flags", [&]() -> herr_t {
    const UnderConnector under = UnderOf(static_cast<const ConnectorInfo*>(info));
    if (H5VLintrospect_get_cap_flags(under.vol_info, under.vol_id, cap_flags) < 0) return -1;
    *cap_flags |= ConnectorClass().cap_flags;
    return 0;
  });
}

}  // namespace prescient::vol
