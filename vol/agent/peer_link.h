// The node agents' transport: MPI two-sided messages over the agents' own
// communicator (the agents are the only MPI processes of Prescient; training
// processes never call MPI).
//
// Why two-sided and not RMA: a row lives in the owner's shared segment, where
// it may be evicted or not yet loaded; the owner must pin it while it is
// copied, load it when it is missing (once, for every node), and refuse when
// its file differs. All of that is a decision on the owner's side, which a
// request/reply makes in one place; one-sided gets would need the segment
// exposed as a window and a locking protocol across nodes, and a peer that
// dies holding a passive-target lock stalls everyone.
//
// Threading: only the thread that calls Poll (the agent's main thread) calls
// MPI, so MPI_THREAD_FUNNELED is enough. Other threads (the prefetch leader)
// hand requests over with Send; their replies come back through the callback
// given with each, called on the polling thread.
//
// Faults: a request not answered within `timeout` completes without a reply
// and its peer is skipped for `suspect_for` (PeerUsable is false), so a
// stopped or unreachable peer costs one timeout, not one per batch; a reply
// that comes later is dropped. A peer that said goodbye (its node is done
// reading) is still asked: it serves until every peer is done, and says it is
// gone if it has to leave before (then it is never asked again).
#ifndef PRESCIENT_VOL_AGENT_PEER_LINK_H_
#define PRESCIENT_VOL_AGENT_PEER_LINK_H_

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cache/base/mutex.h"

namespace prescient::vol::agent {

class PeerLink {
 public:
  using Clock = std::chrono::steady_clock;
  // Answers a request of `peer` with the reply's bytes (on the polling thread).
  using ServeFn = std::function<std::vector<std::byte>(int peer, std::span<const std::byte>)>;
  // The reply to a request, or nullopt (timed out, peer gone). Taken by
  // rvalue reference: no optional is made or destroyed inside std::function's
  // invoker (where GCC 16 reports a spurious maybe-uninitialized).
  using DoneFn = std::function<void(std::optional<std::vector<std::byte>>&&)>;

  struct Options {
    std::chrono::milliseconds timeout{2000};
    std::chrono::milliseconds suspect_for{10000};
  };

  PeerLink(MPI_Comm comm, Options options, ServeFn serve);
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Any thread. Queues `request` (its id is `id`, which the reply carries) for
  // `peer`; `done` is called exactly once, on the polling thread. False (and
  // `done` never called) when the peer is not usable.
  bool Send(int peer, std::uint64_t id, std::vector<std::byte> request, DoneFn done)
      EXCLUDES(mutex_);
  // Any thread: false while `peer` is suspect (it let a request time out) or gone.
  bool PeerUsable(int peer) const;

  // The polling thread: sends what was queued, receives and serves requests,
  // delivers replies, expires requests past their deadline. True if anything
  // happened (the caller may then poll again at once).
  bool Poll() EXCLUDES(mutex_);
  // The polling thread, between polls: sleeps for at most `limit`, waking as
  // soon as another thread queues a request.
  void WaitForWork(std::chrono::microseconds limit) EXCLUDES(mutex_);
  // The polling thread: replies are awaited (poll often: a peer answers soon).
  bool AwaitingReplies() const { return !waiting_.empty(); }
  // The polling thread: tells every peer this node's job is over (it goes on
  // serving them).
  void SayGoodbye();
  // The polling thread: tells every peer still reading that this agent stops
  // serving (it leaves before they are done).
  void SayGone();
  // Every other agent said goodbye, or is gone or suspect.
  bool PeersDone() const;
  // The polling thread: completes pending sends for at most `limit`; false if
  // some are still pending (a stopped peer): MPI_Finalize could then hang.
  bool Drain(std::chrono::milliseconds limit);
  // Requests that timed out so far.
  std::uint64_t timeouts() const { return timeouts_.load(); }

 private:
  struct Outgoing {
    int peer;
    std::uint64_t id;
    std::vector<std::byte> bytes;
    DoneFn done;
  };
  struct Waiting {
    int peer;
    Clock::time_point deadline;
    DoneFn done;
  };
  struct InFlight {
    MPI_Request request;
    std::unique_ptr<std::vector<std::byte>> bytes;  // stable while MPI sends it
  };

  void Isend(int peer, int tag, std::vector<std::byte> bytes);
  bool ReceiveOne();
  void ExpireOverdue();
  void MarkSuspect(int peer);

  MPI_Comm comm_;
  Options options_;
  ServeFn serve_;
  int rank_ = 0;
  int size_ = 1;
  cache::Mutex mutex_;
  cache::CondVar work_;  // signalled when a request is queued
  std::deque<Outgoing> queued_ GUARDED_BY(mutex_);
  // Polling thread only:
  std::map<std::uint64_t, Waiting> waiting_;
  std::vector<InFlight> in_flight_;
  std::vector<bool> said_goodbye_;
  // Per peer: steady-clock nanoseconds until which it is skipped (read by any thread).
  std::unique_ptr<std::atomic<std::int64_t>[]> suspect_until_;
  std::unique_ptr<std::atomic<bool>[]> gone_;
  std::atomic<std::uint64_t> timeouts_{0};
};

}  // namespace prescient::vol::agent

#endif  // PRESCIENT_VOL_AGENT_PEER_LINK_H_
