#include "cache/core/cache_options.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "cache/core/segment_layout.h"

namespace prescient::cache {
namespace {

constexpr std::string_view kAcceptedForms =
    "a non-negative number with an optional unit B, KiB, MiB, GiB, TiB (x1024) or KB, MB, GB, "
    "TB (x1000), e.g. 8GiB or 512MB";

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Multiplier of a unit suffix (already lower-case, spaces trimmed); 0 if unknown.
std::uint64_t UnitMultiplier(std::string_view unit) {
  constexpr std::uint64_t kKi = 1024;
  struct Unit {
    std::string_view name;
    std::uint64_t factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", kKi},
      {"kib", kKi},
      {"kb", 1000},
      {"m", kKi * kKi},
      {"mib", kKi * kKi},
      {"mb", 1000 * 1000},
      {"g", kKi * kKi * kKi},
      {"gib", kKi * kKi * kKi},
      {"gb", 1000 * 1000 * 1000},
      {"t", kKi * kKi * kKi * kKi},
      {"tib", kKi * kKi * kKi * kKi},
      {"tb", 1000ull * 1000 * 1000 * 1000},
  };
  for (const Unit& u : kUnits) {
    if (u.name == unit) return u.factor;
  }
  return 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::uint64_t> ParseByteSize(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  auto fail = [&](std::string_view why) {
    return Status::InvalidArgument("invalid byte size '" + std::string(text) + "': " +
                                   std::string(why) + "; expected " + std::string(kAcceptedForms));
  };
  if (trimmed.empty()) return fail("empty");
  // Digits with at most one decimal point, then the unit.
  std::size_t i = 0;
  bool seen_digit = false, seen_point = false;
  for (; i < trimmed.size(); ++i) {
    const char c = trimmed[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      seen_digit = true;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!seen_digit) return fail("no number");
  const std::string number(trimmed.substr(0, i));
  const std::string unit = Lower(Trim(trimmed.substr(i)));
  const std::uint64_t factor = UnitMultiplier(unit);
  if (factor == 0) return fail("unknown unit '" + unit + "'");
  if (!seen_point) {
    std::uint64_t value = 0;
    for (char c : number) {
      const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
      if (value > (UINT64_MAX - digit) / 10) return fail("too large");
      value = value * 10 + digit;
    }
    if (value != 0 && factor > UINT64_MAX / value) return fail("too large");
    return value * factor;
  }
  // Fractions ("1.5GiB"): long double is exact enough for byte counts < 2^63.
  const long double value = std::stold(number) * static_cast<long double>(factor);
  if (value >= 9.2e18L) return fail("too large");
  return static_cast<std::uint64_t>(std::floor(value));
}

std::uint64_t DefaultCapacityBytes(const std::string& shm_dir) {
  std::uint64_t shm_free = 0;
  struct statvfs fs{};
  if (statvfs(shm_dir.c_str(), &fs) == 0) {
    shm_free = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  }
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  const std::uint64_t ram =
      pages > 0 && page_size > 0 ? static_cast<std::uint64_t>(pages) * page_size : 0;
  // The segment is backed as it fills, but a full cache is memory the
  // training job cannot use: a quarter of RAM at most.
  std::uint64_t capacity = shm_free / 2;
  if (ram != 0 && (capacity == 0 || ram / 4 < capacity)) capacity = ram / 4;
  constexpr std::uint64_t kMiB = 1 << 20;
  return capacity / kMiB * kMiB;
}

std::string DefaultNodeId() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string SegmentBaseName(const CacheOptions& options) {
  std::string node = options.node_id.empty() ? DefaultNodeId() : options.node_id;
  for (char& c : node) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (!keep) c = '_';
  }
  // The layout version is part of the name: builds with different layouts
  // never meet at one name, so a version mismatch there means corruption.
  return options.name_prefix + "-v" + std::to_string(detail::kLayoutVersion) + "-u" +
         std::to_string(geteuid()) + "-" + node;
}

std::string UserDirectoryName() { return "prescient-u" + std::to_string(geteuid()); }

std::string SegmentPath(const CacheOptions& options) {
  std::string dir = options.shm_dir.empty() ? std::string("/dev/shm") : options.shm_dir;
  if (dir.back() != '/') dir += '/';
  return dir + UserDirectoryName() + "/" + SegmentBaseName(options);
}

std::uint32_t DatasetTableFor(const CacheOptions& options) {
  if (options.max_datasets != 0) return options.max_datasets;
  return DatasetTableSize(options.capacity_bytes != 0 ? options.capacity_bytes
                                                      : DefaultCapacityBytes(options.shm_dir));
}

std::uint32_t DatasetTableSize(std::uint64_t capacity) {
  constexpr std::uint64_t kBytesPerRecord = 2048;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(capacity / kBytesPerRecord, 4096, std::uint64_t{1} << 18));
}

}  // namespace prescient::cache
