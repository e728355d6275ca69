// The assembled connector class: identity, every callback slot filled, and the
// exception barrier's contract.
#include "vol/passthrough/connector.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "vol/passthrough/callbacks.h"
#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

// Every function pointer in a callback sub-struct must be non-null: a missing
// row in callback_table.def or a forgotten hand-written slot fails here.
template <typename Struct>
void ExpectAllSlotsFilled(const Struct& s, const char* name, std::size_t skip_bytes = 0) {
  const std::size_t n = (sizeof(Struct) - skip_bytes) / sizeof(void*);
  for (std::size_t i = 0; i < n; ++i) {
    void* slot = nullptr;
    std::memcpy(&slot, reinterpret_cast<const char*>(&s) + skip_bytes + i * sizeof(void*),
                sizeof(void*));
    EXPECT_NE(slot, nullptr) << name << " slot " << i;
  }
}

TEST(ConnectorClass, Identity) {
  const H5VL_class_t& c = ConnectorClass();
  EXPECT_EQ(c.version, static_cast<unsigned>(H5VL_VERSION));
  EXPECT_EQ(c.value, kConnectorValue);
  EXPECT_STREQ(c.name, "prescient");
  EXPECT_GE(c.value, 256);
  EXPECT_LE(c.value, 511);
}

TEST(ConnectorClass, EverySlotIsFilled) {
  const H5VL_class_t& c = ConnectorClass();
  EXPECT_NE(c.initialize, nullptr);
  EXPECT_NE(c.terminate, nullptr);
  ExpectAllSlotsFilled(c.info_cls, "info_cls", sizeof(size_t));
  ExpectAllSlotsFilled(c.wrap_cls, "wrap_cls");
  ExpectAllSlotsFilled(c.attr_cls, "attr_cls");
  ExpectAllSlotsFilled(c.dataset_cls, "dataset_cls");
  ExpectAllSlotsFilled(c.datatype_cls, "datatype_cls");
  ExpectAllSlotsFilled(c.file_cls, "file_cls");
  ExpectAllSlotsFilled(c.group_cls, "group_cls");
  ExpectAllSlotsFilled(c.link_cls, "link_cls");
  ExpectAllSlotsFilled(c.object_cls, "object_cls");
  ExpectAllSlotsFilled(c.introspect_cls, "introspect_cls");
  ExpectAllSlotsFilled(c.request_cls, "request_cls");
  ExpectAllSlotsFilled(c.blob_cls, "blob_cls");
  ExpectAllSlotsFilled(c.token_cls, "token_cls");
  EXPECT_NE(c.optional, nullptr);
}

TEST(ConnectorClass, RegistersWithHdf5) {
  const hid_t id = H5VLregister_connector(&ConnectorClass(), H5P_VOL_INITIALIZE_DEFAULT);
  ASSERT_GE(id, 0);
  EXPECT_GT(H5VLis_connector_registered_by_name("prescient"), 0);
  EXPECT_GE(H5VLunregister_connector(id), 0);
}

// The number of entries on the current error stack whose description contains `text`.
int ErrorsMentioning(const std::string& text) {
  struct Search {
    std::string text;
    int found = 0;
  } search{text};
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* s = static_cast<Search*>(data);
        if (e->desc != nullptr && std::string(e->desc).find(s->text) != std::string::npos)
          ++s->found;
        return 0;
      },
      &search);
  return search.found;
}

TEST(Barrier, ExceptionBecomesFailureAndPushedError) {
  H5open();
  RegisterErrorClass();
  H5Eclear2(H5E_DEFAULT);
  const herr_t status =
      Barrier("test_slot", []() -> herr_t { throw std::runtime_error("boom 42"); });
  EXPECT_EQ(status, -1);
  EXPECT_EQ(ErrorsMentioning("boom 42"), 1);
  void* pointer = Barrier("test_slot", []() -> void* { throw 7; });
  EXPECT_EQ(pointer, nullptr);
  EXPECT_EQ(ErrorsMentioning("unknown exception"), 1);
  H5Eclear2(H5E_DEFAULT);
}

TEST(PreservedErrorStack, KeepsErrorsAcrossApiCalls) {
  H5open();
  RegisterErrorClass();
  H5Eclear2(H5E_DEFAULT);
  PushError("test", "the under connector said no");
  {
    PreservedErrorStack keep;
    // Any API call clears the stack on entry.
    const hid_t plist = H5Pcreate(H5P_FILE_ACCESS);
    H5Pclose(plist);
  }
  EXPECT_EQ(ErrorsMentioning("the under connector said no"), 1);
  H5Eclear2(H5E_DEFAULT);
}

TEST(PreservedErrorStack, AnEmptyStackStaysEmptyWhateverTheCleanupPushes) {
  H5open();
  RegisterErrorClass();
  H5Eclear2(H5E_DEFAULT);
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &data);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  {
    PreservedErrorStack keep;
    EXPECT_LT(H5Idec_ref(H5I_INVALID_HID), 0);  // a failing cleanup call pushes errors
    EXPECT_GT(H5Eget_num(H5E_DEFAULT), 0);
  }
  EXPECT_EQ(H5Eget_num(H5E_DEFAULT), 0);
  H5Eset_auto2(H5E_DEFAULT, func, data);
}

}  // namespace
}  // namespace prescient::vol
