// The generated forwarder, on fake callback/forwarding-function pairs: objects
// are unwrapped, the id lands at its declared position, new objects and
// requests are wrapped, a successful close frees the wrapper, failures pass
// through untouched; and which wrappers hold a reference on their connector.
#include "vol/passthrough/forwarding.h"

#include <gtest/gtest.h>

#include "vol/objects/file_state.h"
#include "vol/passthrough/callbacks.h"

namespace prescient::vol {
namespace {

struct Seen {
  void* obj = nullptr;
  void* obj2 = nullptr;
  hid_t id = H5I_INVALID_HID;
  int value = 0;
};
Seen g_seen;
herr_t g_status = 0;
int g_under_request = 0;
int g_under_object = 0;

herr_t FakeGet(void* obj, hid_t id, int value, void** req) {
  g_seen = {obj, nullptr, id, value};
  if (req != nullptr) *req = &g_under_request;
  return g_status;
}
using GetCallback = herr_t (*)(void*, int, void**);

void* FakeOpen(void* obj, const char*, hid_t id, void**) {
  g_seen = {obj, nullptr, id, 0};
  return g_status < 0 ? nullptr : &g_under_object;
}
using OpenCallback = void* (*)(void*, const char*, void**);

herr_t FakeCopy(void* src, int value, void* dst, hid_t id) {
  g_seen = {src, dst, id, value};
  return g_status;
}
using CopyCallback = herr_t (*)(void*, int, void*);

// The fakes stand for the H5VL* functions, so no callback of the native
// connector's class may be called in their place: a slot it lacks.
template <typename Callback>
constexpr auto kNoSlot = [](const H5VL_class_t&) -> Callback { return nullptr; };

class ForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    H5open();
    g_status = 0;
    g_seen = {};
    file_ = FileState::Make("/nonexistent", false);
    wrapped_ = VolObject::Wrap(&under_, H5VL_NATIVE, ObjectKind::kGroup, file_);
  }
  void TearDown() override {
    if (wrapped_ != nullptr) VolObject::Free(wrapped_);
  }
  int under_ = 0;
  std::shared_ptr<FileState> file_;
  VolObject* wrapped_ = nullptr;
};

TEST_F(ForwarderTest, UnwrapsAndInsertsId) {
  using F = Forwarder<"get", FakeGet, kNoSlot<GetCallback>, 1, Result::kStatus, ObjectKind::kOther,
                      ObjectsAt<0>, GetCallback>;
  EXPECT_EQ(F::Call(wrapped_, 42, nullptr), 0);
  EXPECT_EQ(g_seen.obj, &under_);
  EXPECT_EQ(g_seen.id, H5VL_NATIVE);
  EXPECT_EQ(g_seen.value, 42);
}

TEST_F(ForwarderTest, WrapsAsyncRequest) {
  using F = Forwarder<"get", FakeGet, kNoSlot<GetCallback>, 1, Result::kStatus, ObjectKind::kOther,
                      ObjectsAt<0>, GetCallback>;
  void* req = nullptr;
  ASSERT_EQ(F::Call(wrapped_, 1, &req), 0);
  ASSERT_NE(req, nullptr);
  VolObject* request = VolObject::From(req);
  EXPECT_EQ(request->under, &g_under_request);
  EXPECT_EQ(request->kind, ObjectKind::kRequest);
  VolObject::Free(request);
}

TEST_F(ForwarderTest, WrapsNewObjectInTheParentsFile) {
  using F = Forwarder<"open", FakeOpen, kNoSlot<OpenCallback>, 2, Result::kNewObject,
                      ObjectKind::kDataset, ObjectsAt<0>, OpenCallback>;
  void* opened = F::Call(wrapped_, "x", nullptr);
  ASSERT_NE(opened, nullptr);
  VolObject* object = VolObject::From(opened);
  EXPECT_EQ(object->under, &g_under_object);
  EXPECT_EQ(object->kind, ObjectKind::kDataset);
  EXPECT_EQ(object->file, file_);
  EXPECT_EQ(object->magic, VolObject::kMagic);
  VolObject::Free(object);
}

TEST_F(ForwarderTest, FailurePassesThroughWithoutWrapping) {
  g_status = -1;
  using F = Forwarder<"open", FakeOpen, kNoSlot<OpenCallback>, 2, Result::kNewObject,
                      ObjectKind::kDataset, ObjectsAt<0>, OpenCallback>;
  EXPECT_EQ(F::Call(wrapped_, "x", nullptr), nullptr);
  using G = Forwarder<"get", FakeGet, kNoSlot<GetCallback>, 1, Result::kClose, ObjectKind::kOther,
                      ObjectsAt<0>, GetCallback>;
  EXPECT_EQ(G::Call(wrapped_, 1, nullptr), -1);  // a failed close keeps the wrapper
  EXPECT_EQ(wrapped_->magic, VolObject::kMagic);
}

struct Closed {
  void* under = nullptr;
  hid_t id = H5I_INVALID_HID;
  ObjectKind kind = ObjectKind::kOther;
  int count = 0;
};
Closed g_closed;
void RecordClose(void* under, hid_t id, ObjectKind kind) {
  g_closed = {under, id, kind, g_closed.count + 1};
}

TEST_F(ForwarderTest, AnObjectThatCannotBeWrappedIsClosedNotLeaked) {
  using F = Forwarder<"open", FakeOpen, kNoSlot<OpenCallback>, 2, Result::kNewObject,
                      ObjectKind::kDataset, ObjectsAt<0>, OpenCallback>;
  g_closed = {};
  testing::SetCloseUnderRecorder(&RecordClose);
  testing::FailNextWrap();
  void* result = F::Call(wrapped_, "name", nullptr);
  testing::SetCloseUnderRecorder(nullptr);
  EXPECT_EQ(result, nullptr);  // the open fails, with an error on the stack
  EXPECT_EQ(g_closed.count, 1);
  EXPECT_EQ(g_closed.under, &g_under_object);
  EXPECT_EQ(g_closed.id, H5VL_NATIVE);
  EXPECT_EQ(g_closed.kind, ObjectKind::kDataset);
  H5Eclear2(H5E_DEFAULT);
}

TEST_F(ForwarderTest, SuccessfulCloseFreesWrapper) {
  using F = Forwarder<"close", FakeGet, kNoSlot<GetCallback>, 1, Result::kClose, ObjectKind::kOther,
                      ObjectsAt<0>, GetCallback>;
  EXPECT_EQ(F::Call(wrapped_, 0, nullptr), 0);
  wrapped_ = nullptr;  // freed by the forwarder
}

TEST_F(ForwarderTest, TwoObjectsBothUnwrappedNullAllowed) {
  using F = Forwarder<"copy", FakeCopy, kNoSlot<CopyCallback>, 3, Result::kStatus,
                      ObjectKind::kOther, ObjectsAt<0, 2>, CopyCallback>;
  int other_under = 0;
  VolObject* other = VolObject::Wrap(&other_under, H5VL_NATIVE, ObjectKind::kGroup, nullptr);
  EXPECT_EQ(F::Call(wrapped_, 3, other), 0);
  EXPECT_EQ(g_seen.obj, &under_);
  EXPECT_EQ(g_seen.obj2, &other_under);
  EXPECT_EQ(F::Call(nullptr, 3, other), 0);  // id comes from the second object
  EXPECT_EQ(g_seen.obj, nullptr);
  EXPECT_EQ(g_seen.id, H5VL_NATIVE);
  VolObject::Free(other);
}

// HDF5 holds the native connector's id for as long as it is initialised, so a
// wrapper of a native object takes no reference (and its free calls no HDF5
// function); a wrapper of another connector's object holds one until freed.
// Either way an error stack the application has is left as it was.
TEST(VolObjectTest, OnlyAWrapperOfANonNativeConnectorHoldsAReferenceOnIt) {
  H5open();
  const hid_t native = H5VL_NATIVE;
  // Any connector but the native one: this one's own class serves.
  const hid_t other = H5VLregister_connector(&ConnectorClass(), H5P_VOL_INITIALIZE_DEFAULT);
  ASSERT_GE(other, 0);
  ASSERT_NE(other, native);
  const int native_refs = H5Iget_ref(native);
  const int other_refs = H5Iget_ref(other);
  int under = 0;

  VolObject* of_native = VolObject::Wrap(&under, native, ObjectKind::kDataset, nullptr);
  VolObject* of_other = VolObject::Wrap(&under, other, ObjectKind::kDataset, nullptr);
  EXPECT_FALSE(of_native->holds_vol_ref);
  EXPECT_TRUE(of_other->holds_vol_ref);
  EXPECT_EQ(H5Iget_ref(native), native_refs);
  EXPECT_EQ(H5Iget_ref(other), other_refs + 1);

  // The application's error stack, which a public call (H5Iget_ref among
  // them) would clear, is as it was after each free.
  (void)H5Iinc_ref(H5I_INVALID_HID);
  const hssize_t errors = H5Eget_num(H5E_DEFAULT);
  ASSERT_GT(errors, 0);
  VolObject::Free(of_native);
  EXPECT_EQ(H5Eget_num(H5E_DEFAULT), errors);
  VolObject::Free(of_other);
  EXPECT_EQ(H5Eget_num(H5E_DEFAULT), errors);

  EXPECT_EQ(H5Iget_ref(native), native_refs);
  EXPECT_EQ(H5Iget_ref(other), other_refs);
  EXPECT_GE(H5VLunregister_connector(other), 0);
}

}  // namespace
}  // namespace prescient::vol
