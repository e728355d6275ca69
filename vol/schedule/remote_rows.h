// Rows a prefetch round takes from other nodes instead of storage: the node
// agent's peers (vol/agent/peer_rows.h). Training processes never have one.
//
// The round claims its rows as usual (so the node's readers wait for them
// instead of loading them), hands every dataset's claimed rows to Start,
// which keeps those another node owns and sends for them, reads the rest
// from storage, and then calls Finish: the rows that arrived intact are
// published, and those that did not (a peer that refused, failed or did not
// answer in time) come back still claimed, to be read from storage.
#ifndef PRESCIENT_VOL_SCHEDULE_REMOTE_ROWS_H_
#define PRESCIENT_VOL_SCHEDULE_REMOTE_ROWS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "vol/serve/cached_dataset.h"

namespace prescient::vol {

class RemoteRows {
 public:
  class Fetch {
   public:
    virtual ~Fetch() = default;
    // Waits for the replies (a bounded time), publishes the rows that arrived
    // intact, and returns the rest (ascending, still claimed by this process).
    virtual std::vector<std::uint64_t> Finish() = 0;
  };

  virtual ~RemoteRows() = default;
  // `rows`: rows of `dataset` this process claimed, ascending. Moves those to
  // be fetched from other nodes out of `rows` and sends for them; null when
  // there are none.
  virtual std::unique_ptr<Fetch> Start(const CachedDataset& dataset,
                                       std::vector<std::uint64_t>& rows) = 0;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_REMOTE_ROWS_H_
