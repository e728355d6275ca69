// A statistics file that is always up to date on disk.
//
// DataLoader workers end with os._exit (no atexit, no HDF5 shutdown) and often
// never close their h5py file, so a file written "at the end" would be lost.
// Instead each process maps its JSON file (MAP_SHARED) and keeps the counters
// in it as right-aligned decimal fields of fixed width, padded with spaces
// (valid JSON), incremented in place. The page cache holds the latest values
// whatever way the process ends, SIGKILL included.
//
// Not thread-safe: the caller serialises updates (Stats holds a mutex).
#ifndef PRESCIENT_VOL_RUNTIME_LIVE_STATS_FILE_H_
#define PRESCIENT_VOL_RUNTIME_LIVE_STATS_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prescient::vol {

class LiveStatsFile {
 public:
  LiveStatsFile() = default;
  ~LiveStatsFile();
  LiveStatsFile(const LiveStatsFile&) = delete;
  LiveStatsFile& operator=(const LiveStatsFile&) = delete;

  // Creates `path` (replacing a file of this user's; refusing a symbolic
  // link, another user's file or anything but a regular file), writes `text`
  // into it and maps it. The file is 0600 and its blocks are reserved first,
  // so a full filesystem is an error here, never a SIGBUS later. Every run of
  // kWidth '@' characters in `text` is a counter field, numbered in order of
  // appearance, starting at 0. Returns an error message or "".
  std::string Open(const std::string& path, std::string text);
  static std::string Marker() { return std::string(kWidth, '@'); }
  bool is_open() const { return base_ != nullptr; }

  // Adds `delta` to field `index`.
  void Add(std::size_t index, std::uint64_t delta);
  // Sets a field to a value (used once after Open to seed it).
  void Set(std::size_t index, std::uint64_t value);

  // Forgets the mapping without touching the file: a forked child must not
  // keep writing into its parent's file.
  void Abandon();

  static constexpr std::size_t kWidth = 20;  // digits of UINT64_MAX

 private:
  char* base_ = nullptr;
  std::size_t size_ = 0;
  std::vector<char*> slots_;  // start of each field's kWidth characters
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_LIVE_STATS_FILE_H_
