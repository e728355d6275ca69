// The small pieces of schedule_file.h: fingerprints, error names, views.
#include "scheduler/core/schedule_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace prescient::scheduler {

DatasetFingerprint FingerprintDataset(const std::string& file_path, const std::string& dataset_name,
                                      std::uint64_t rows, std::uint64_t row_bytes) {
  struct stat st;
  if (::stat(file_path.c_str(), &st) != 0) {
    throw ScheduleFileError(ScheduleFileErrorCode::kIo, "cannot stat dataset file '" + file_path +
                                                            "': " + std::strerror(errno));
  }
  DatasetFingerprint fp;
  fp.file_path = file_path;
  fp.dataset_name = dataset_name;
  fp.rows = rows;
  fp.row_bytes = row_bytes;
  fp.file_size = static_cast<std::uint64_t>(st.st_size);
  fp.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return fp;
}

const char* ScheduleFileErrorCodeName(ScheduleFileErrorCode code) {
  switch (code) {
    case ScheduleFileErrorCode::kIo:
      return "io";
    case ScheduleFileErrorCode::kTruncated:
      return "truncated";
    case ScheduleFileErrorCode::kBadMagic:
      return "bad-magic";
    case ScheduleFileErrorCode::kBadVersion:
      return "bad-version";
    case ScheduleFileErrorCode::kBadChecksum:
      return "bad-checksum";
    case ScheduleFileErrorCode::kCorrupt:
      return "corrupt";
    case ScheduleFileErrorCode::kUnsupported:
      return "unsupported";
    case ScheduleFileErrorCode::kFingerprintMismatch:
      return "fingerprint-mismatch";
    case ScheduleFileErrorCode::kOutOfRange:
      return "out-of-range";
  }
  return "unknown";
}

SampleId RankEpochView::At(std::size_t position) const {
  if (position >= samples_.size()) {
    throw ScheduleFileError(ScheduleFileErrorCode::kOutOfRange,
                            "position " + std::to_string(position) + " >= " +
                                std::to_string(samples_.size()) + " samples in this rank's epoch");
  }
  return samples_[position];
}

RankEpoch RankEpochView::ToRankEpoch() const {
  RankEpoch part;
  part.samples.assign(samples_.begin(), samples_.end());
  part.step_begin.assign(step_begin_.begin(), step_begin_.end());
  return part;
}

}  // namespace prescient::scheduler
