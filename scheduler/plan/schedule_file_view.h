// A ScheduleView (schedule_view.h) over a schedule file: each part is the
// reader's own view of the mapped file, kept alive by the PartView, so a pass
// over the whole schedule copies nothing.
#ifndef PRESCIENT_SCHEDULER_PLAN_SCHEDULE_FILE_VIEW_H_
#define PRESCIENT_SCHEDULER_PLAN_SCHEDULE_FILE_VIEW_H_

#include <cstdint>
#include <memory>

#include "scheduler/core/schedule_file.h"
#include "scheduler/plan/schedule_view.h"

namespace prescient::scheduler::plan {

// `ranks_per_node` replaces the file's layout when nonzero.
inline ScheduleView ViewOfFile(std::shared_ptr<const ScheduleReader> reader,
                               std::uint32_t ranks_per_node = 0) {
  ScheduleView view;
  const ScheduleHeader& header = reader->header();
  view.num_samples = header.num_samples;
  view.layout = header.layout;
  if (ranks_per_node != 0) view.layout.ranks_per_node = ranks_per_node;
  view.epochs = header.epochs;
  view.part = [reader](std::uint32_t rank, std::uint32_t epoch) {
    auto part = std::make_shared<RankEpochView>(reader->Part(rank, epoch));
    return PartView{part->samples(), part->step_begin(), part};
  };
  return view;
}

}  // namespace prescient::scheduler::plan

#endif  // PRESCIENT_SCHEDULER_PLAN_SCHEDULE_FILE_VIEW_H_
