// The generic pass-through callback: one template, instantiated once per row of
// callback_table.def, instead of eighty hand-written forwarders.
//
// A row names the H5VL_class_t slot, the H5VL* function that forwards it to the
// connector underneath, where that function takes the connector id, which
// parameters are wrapped objects, and what the result means. From the slot's
// own function-pointer type the template deduces the exact signature, so the
// generated callback always matches the HDF5 headers it is compiled against; a
// static_assert checks that the forwarding function's parameters are the
// callback's with an hid_t inserted at the declared position, so a wrong row
// or an HDF5 API change fails to compile here instead of corrupting memory.
//
// The body unwraps the objects, calls the under connector (HDF5's native
// connector through its own callback in the slot, native_connector.h; any other
// through the H5VL* function), wraps a returned object and an async request,
// frees the wrapper after a successful close, and runs inside Barrier() so no
// exception escapes into HDF5.
#ifndef PRESCIENT_VOL_PASSTHROUGH_FORWARDING_H_
#define PRESCIENT_VOL_PASSTHROUGH_FORWARDING_H_

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "vol/native_connector.h"
#include "vol/objects/object.h"
#include "vol/runtime/error.h"
#include "vol/runtime/trace.h"

namespace prescient::vol {

// What the callback's result means.
enum class Result {
  kStatus,     // herr_t; nothing to wrap
  kNewObject,  // a new under object (create/open): wrap it, same file as the parent
  kClose,      // herr_t; on success the wrapper of the first object is freed
};

// Which parameters carry wrapped objects (may be null, e.g. link copy's source).
template <std::size_t... I>
struct ObjectsAt {};

// A callback's name as a template argument, for error messages and tracing.
template <std::size_t N>
struct SlotName {
  constexpr SlotName(const char (&s)[N]) { std::copy_n(s, N, value); }
  char value[N];
};

namespace internal {

// The forwarding function type expected for callback type R(Args...) with the
// connector id at position kPos.
template <typename R, typename Tuple, typename Before, typename After>
struct InsertId;
template <typename R, typename Tuple, std::size_t... B, std::size_t... A>
struct InsertId<R, Tuple, std::index_sequence<B...>, std::index_sequence<A...>> {
  using type = R (*)(std::tuple_element_t<B, Tuple>..., hid_t,
                     std::tuple_element_t<sizeof...(B) + A, Tuple>...);
};

template <std::size_t kPos, typename Fn, typename Tuple, std::size_t... B, std::size_t... A>
decltype(auto) CallWithId(Fn fn, hid_t id, Tuple& args, std::index_sequence<B...>,
                          std::index_sequence<A...>) {
  return fn(std::get<B>(args)..., id, std::get<kPos + A>(args)...);
}

// Replaces the wrapped object at position I by its under object; the first
// non-null object decides the under connector id.
template <std::size_t I, typename Tuple>
void Unwrap(Tuple& args, hid_t& under_vol_id) {
  auto& slot = std::get<I>(args);
  if (slot == nullptr) return;
  VolObject* object = VolObject::From(slot);
  if (under_vol_id < 0) under_vol_id = object->under_vol_id;
  slot = object->under;
}

// HDF5's convention: pointers fail as null, statuses as negative values.
template <typename R>
bool IsFailure(R result) {
  if constexpr (std::is_pointer_v<R>) {
    return result == nullptr;
  } else {
    return result < 0;
  }
}

// Whether the native connector's callback in slot `name` may be called in
// place of the H5VL* function: not for the token slots, whose H5VL* functions
// compare, print and parse tokens themselves when a connector has no callback
// or is handed a null token.
template <std::size_t N>
constexpr bool CallableDirectly(const char (&name)[N]) {
  constexpr std::string_view kTokenSlots = "token_cls.";
  return !std::string_view(name, N - 1).starts_with(kTokenSlots);
}

template <typename... Args>
constexpr bool kLastIsRequest = [] {
  if constexpr (sizeof...(Args) == 0) {
    return false;
  } else {
    return std::is_same_v<std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>, void**>;
  }
}();

}  // namespace internal

// Wraps the under request an async call returned, so later request callbacks
// find a VolObject.
inline void WrapRequest(void** req, hid_t under_vol_id) {
  if (req != nullptr && *req != nullptr) {
    *req = VolObject::Wrap(*req, under_vol_id, ObjectKind::kRequest, nullptr);
  }
}

// kSlot gives the slot's callback from a connector class (PRESCIENT_SLOT).
template <SlotName kName, auto kUnderFn, auto kSlot, std::size_t kIdPos, Result kResult,
          ObjectKind kKind, typename Objects, typename Callback>
struct Forwarder;

template <SlotName kName, auto kUnderFn, auto kSlot, std::size_t kIdPos, Result kResult,
          ObjectKind kKind, std::size_t... kObjects, typename R, typename... Args>
struct Forwarder<kName, kUnderFn, kSlot, kIdPos, kResult, kKind, ObjectsAt<kObjects...>,
                 R (*)(Args...)> {
  using ArgsTuple = std::tuple<Args...>;
  static_assert(kIdPos <= sizeof...(Args), "connector id position out of range");
  static_assert(
      std::is_same_v<
          decltype(kUnderFn),
          typename internal::InsertId<R, ArgsTuple, std::make_index_sequence<kIdPos>,
                                      std::make_index_sequence<sizeof...(Args) - kIdPos>>::type>,
      "the forwarding function does not match the callback with the id inserted");

  static R Call(Args... raw) noexcept {
    return Barrier(kName.value, [&]() -> R {
      Trace(kName.value);
      ArgsTuple args{raw...};
      constexpr std::size_t kFirst = std::get<0>(std::make_tuple(kObjects...));
      VolObject* first = VolObject::From(std::get<kFirst>(args));
      hid_t under_vol_id = H5I_INVALID_HID;
      (internal::Unwrap<kObjects>(args, under_vol_id), ...);
      auto via_api = [&] {
        return internal::CallWithId<kIdPos>(kUnderFn, under_vol_id, args,
                                            std::make_index_sequence<kIdPos>{},
                                            std::make_index_sequence<sizeof...(Args) - kIdPos>{});
      };
      R result;
      if constexpr (internal::CallableDirectly(kName.value)) {
        const H5VL_class_t* native = NativeClassOf(std::get<kFirst>(args), under_vol_id);
        result = std::apply(
            [&](auto... under_args) { return CallNativeOr<kSlot>(native, via_api, under_args...); },
            args);
      } else {
        result = via_api();
      }
      if (internal::IsFailure(result)) return result;
      if constexpr (internal::kLastIsRequest<Args...>) {
        WrapRequest(std::get<sizeof...(Args) - 1>(args), under_vol_id);
      }
      if constexpr (kResult == Result::kNewObject) {
        return VolObject::WrapOpened(result, under_vol_id, kKind, first ? first->file : nullptr);
      } else if constexpr (kResult == Result::kClose) {
        VolObject::Free(first);
      }
      return result;
    });
  }
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_PASSTHROUGH_FORWARDING_H_
