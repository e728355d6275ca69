// Names HDF5 returns into a caller's buffer (file names, object paths), asked
// in one library call for the common length and again only for longer ones.
#ifndef PRESCIENT_VOL_OBJECTS_NAME_QUERY_H_
#define PRESCIENT_VOL_OBJECTS_NAME_QUERY_H_

#include <cstddef>
#include <optional>
#include <string>

namespace prescient::vol {

// `ask(buffer, size, &length)` is one HDF5 name query: it copies at most
// size - 1 characters and a terminator, sets the full length and returns
// false on failure. The name, or nothing when a query failed.
template <typename Ask>
std::optional<std::string> QueryName(Ask ask) {
  char buffer[512];
  std::size_t length = 0;
  if (!ask(buffer, sizeof(buffer), &length)) return std::nullopt;
  if (length < sizeof(buffer)) return std::string(buffer, length);
  std::string name(length + 1, '\0');
  if (!ask(name.data(), name.size(), &length)) return std::nullopt;
  name.resize(length);
  return name;
}

// The same for queries that return the full length, negative on failure
// (H5Pget_virtual_filename, H5Pget_virtual_dsetname, H5Pget_virtual_prefix):
// `get(buffer, size)`.
template <typename Get>
std::optional<std::string> QueryNameByLength(Get get) {
  return QueryName([&](char* buffer, std::size_t size, std::size_t* length) {
    const auto got = get(buffer, size);
    if (got < 0) return false;
    *length = static_cast<std::size_t>(got);
    return true;
  });
}

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_NAME_QUERY_H_
