// Who stops a prefetch thread: any thread, or one that holds HDF5's lock
// (the connector's terminate callback, at the application's exit), which
// must not join a thread that may be waiting for that lock
// (Prefetcher::Stop).
#ifndef PRESCIENT_VOL_SCHEDULE_STOP_CALLER_H_
#define PRESCIENT_VOL_SCHEDULE_STOP_CALLER_H_

namespace prescient::vol {

enum class StopCaller { kAnyThread, kHoldingHdf5Lock };

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_STOP_CALLER_H_
