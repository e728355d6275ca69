#include "cache/core/segment_place.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace prescient::cache::detail {

Result<SegmentPlace> OpenSegmentPlace(const CacheOptions& options,
                                      std::vector<std::string>* /*notices*/) {
  SegmentPlace place;
  place.dir_path = options.shm_dir.empty() ? std::string("/dev/shm") : options.shm_dir;
  while (place.dir_path.size() > 1 && place.dir_path.back() == '/') place.dir_path.pop_back();
  place.base = SegmentBaseName(options);
  const int fd = open(place.dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "cannot open the cache directory " + place.dir_path);
  place.dir = UniqueFd(fd);
  return place;
}

}  // namespace prescient::cache::detail
