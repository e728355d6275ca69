// The samples a read's rows belong to, in the order read, each once for a run
// of its rows: a group read whole (one sample of 256 rows) is one sample,
// observed and counted once (ScheduleFollower::OnRead).
#ifndef PRESCIENT_VOL_SCHEDULE_SAMPLES_OF_ROWS_H_
#define PRESCIENT_VOL_SCHEDULE_SAMPLES_OF_ROWS_H_

#include <cstdint>
#include <span>
#include <vector>

namespace prescient::vol {

// Replaces `samples` with the samples of `rows`, a sample listed again only
// where the one before differs. REQUIRES: sample_of(row + 1) - sample_of(row)
// is 0 or 1, as SampleMap::SampleOf is within a file (first sample + row /
// rows per sample). Then a run of consecutive rows holds exactly the samples
// from its first row's to its last's, so sample_of is asked twice a run, not
// once a row.
template <typename SampleOf>
void SamplesOfRows(std::span<const std::uint64_t> rows, const SampleOf& sample_of,
                   std::vector<std::uint64_t>& samples) {
  samples.clear();
  for (std::size_t begin = 0; begin < rows.size();) {
    std::size_t end = begin + 1;
    while (end < rows.size() && rows[end] == rows[end - 1] + 1) ++end;
    const std::uint64_t last = sample_of(rows[end - 1]);
    for (std::uint64_t sample = sample_of(rows[begin]); sample <= last; ++sample) {
      if (samples.empty() || samples.back() != sample) samples.push_back(sample);
    }
    begin = end;
  }
}

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_SAMPLES_OF_ROWS_H_
