#include "vol/serve/small_dataset_census.h"

#include <algorithm>

namespace prescient::vol {

bool SmallDatasetCensus::NoteAndCheckMany(const FileKey& file, std::uint64_t address) {
  auto it = files_.find(file);
  if (it == files_.end()) {
    if (files_.size() >= kFilesKept) {
      std::erase_if(files_, [](const auto& entry) { return !entry.second.many; });
    }
    it = files_.emplace(file, Tally{}).first;
  }
  Tally& tally = it->second;
  if (tally.many) return true;
  const auto& seen = tally.addresses;
  if (std::find(seen.begin(), seen.end(), address) != seen.end()) return false;
  if (seen.size() < kManyPerFile) {
    tally.addresses.push_back(address);
    return false;
  }
  tally.many = true;
  tally.addresses = {};
  return true;
}

}  // namespace prescient::vol
