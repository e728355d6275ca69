#include "vol/passthrough/connector_info.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "vol/runtime/error.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Registers (or finds) the under connector; returns a new reference.
hid_t RegisterUnder(const std::string& under_vol) {
  if (under_vol.empty()) {
    const hid_t native = H5VL_NATIVE;
    H5Iinc_ref(native);
    return native;
  }
  char* end = nullptr;
  const unsigned long value = std::strtoul(under_vol.c_str(), &end, 10);
  if (end != under_vol.c_str() && *end == '\0') {
    return H5VLregister_connector_by_value(static_cast<H5VL_class_value_t>(value),
                                           H5P_VOL_INITIALIZE_DEFAULT);
  }
  return H5VLregister_connector_by_name(under_vol.c_str(), H5P_VOL_INITIALIZE_DEFAULT);
}

}  // namespace

InfoStringParts SplitInfoString(std::string_view text) {
  InfoStringParts parts;
  std::size_t pos = 0;
  while (pos < text.size()) {
    // One item runs to the next ';' outside braces.
    std::size_t end = pos;
    int depth = 0;
    for (; end < text.size(); ++end) {
      if (text[end] == '{') ++depth;
      if (text[end] == '}' && --depth < 0) throw std::invalid_argument("unbalanced '}'");
      if (text[end] == ';' && depth == 0) break;
    }
    if (depth != 0) throw std::invalid_argument("unbalanced '{'");
    const std::string_view item = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    const std::string_view key = Trim(item.substr(0, eq));
    const std::string_view value = eq == std::string_view::npos ? "" : Trim(item.substr(eq + 1));
    if (key == "under_vol") {
      parts.under_vol = std::string(value);
    } else if (key == "under_info") {
      if (value.size() < 2 || value.front() != '{' || value.back() != '}') {
        throw std::invalid_argument("under_info must be enclosed in braces");
      }
      parts.under_info = std::string(value.substr(1, value.size() - 2));
    } else {
      if (!parts.settings.empty()) parts.settings += ';';
      parts.settings += std::string(item);
    }
  }
  return parts;
}

UnderConnector UnderOf(const ConnectorInfo* info) {
  if (info == nullptr) return {H5VL_NATIVE, nullptr};
  return {info->under_vol_id, info->under_vol_info};
}

void* InfoCopy(const void* info) {
  const auto* shared = static_cast<const ConnectorInfo*>(info);
  shared->references.fetch_add(1, std::memory_order_relaxed);
  return const_cast<ConnectorInfo*>(shared);
}

herr_t InfoCompare(int* cmp_value, const void* info1, const void* info2) {
  return Barrier("info_cls.cmp", [&]() -> herr_t {
    const auto* a = static_cast<const ConnectorInfo*>(info1);
    const auto* b = static_cast<const ConnectorInfo*>(info2);
    *cmp_value = 0;
    if (H5VLcmp_connector_cls(cmp_value, a->under_vol_id, b->under_vol_id) < 0) return -1;
    if (*cmp_value != 0) return 0;
    if (H5VLcmp_connector_info(cmp_value, a->under_vol_id, a->under_vol_info, b->under_vol_info) <
        0) {
      return -1;
    }
    if (*cmp_value != 0) return 0;
    *cmp_value = a->settings.compare(b->settings);
    return 0;
  });
}

herr_t InfoFree(void* info) {
  return Barrier("info_cls.free", [&]() -> herr_t {
    auto* own = static_cast<ConnectorInfo*>(info);
    if (own->references.fetch_sub(1, std::memory_order_acq_rel) > 1) return 0;
    PreservedErrorStack keep;
    if (own->under_vol_info != nullptr)
      H5VLfree_connector_info(own->under_vol_id, own->under_vol_info);
    H5Idec_ref(own->under_vol_id);
    delete own;
    return 0;
  });
}

herr_t InfoToString(const void* info, char** str) {
  return Barrier("info_cls.to_str", [&]() -> herr_t {
    const auto* own = static_cast<const ConnectorInfo*>(info);
    H5VL_class_value_t value = H5_VOL_NATIVE;
    if (H5VLget_value(own->under_vol_id, &value) < 0) return -1;
    char* under_str = nullptr;
    if (H5VLconnector_info_to_str(own->under_vol_info, own->under_vol_id, &under_str) < 0)
      return -1;
    std::string text = "under_vol=" + std::to_string(static_cast<unsigned>(value)) +
                       ";under_info={" + (under_str ? under_str : "") + "}";
    if (under_str != nullptr) H5free_memory(under_str);
    if (!own->settings.empty()) text += ";" + own->settings;
    *str = static_cast<char*>(H5allocate_memory(text.size() + 1, false));
    if (*str == nullptr) return -1;
    std::memcpy(*str, text.c_str(), text.size() + 1);
    return 0;
  });
}

herr_t InfoFromString(const char* str, void** info) {
  return Barrier("info_cls.from_str", [&]() -> herr_t {
    const InfoStringParts parts = SplitInfoString(str ? str : "");
    Runtime::Get().RecordInfoSettings(parts.settings);
    auto* own = new ConnectorInfo;
    own->settings = parts.settings;
    own->under_vol_id = RegisterUnder(parts.under_vol);
    if (own->under_vol_id < 0) {
      delete own;
      throw std::invalid_argument("under_vol='" + parts.under_vol + "' names no usable connector");
    }
    if (!parts.under_info.empty() &&
        H5VLconnector_str_to_info(parts.under_info.c_str(), own->under_vol_id,
                                  &own->under_vol_info) < 0) {
      InfoFree(own);
      throw std::invalid_argument("under_info={" + parts.under_info + "} was rejected");
    }
    *info = own;
    return 0;
  });
}

}  // namespace prescient::vol
