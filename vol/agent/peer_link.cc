#include "vol/agent/peer_link.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "vol/agent/peer_protocol.h"

namespace prescient::vol::agent {
namespace {

std::int64_t Ns(PeerLink::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

PeerLink::PeerLink(MPI_Comm comm, Options options, ServeFn serve)
    : comm_(comm), options_(options), serve_(std::move(serve)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  said_goodbye_.assign(static_cast<std::size_t>(size_), false);
  suspect_until_ = std::make_unique<std::atomic<std::int64_t>[]>(static_cast<std::size_t>(size_));
  gone_ = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(size_));
}

bool PeerLink::PeerUsable(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) return false;
  if (gone_[peer].load(std::memory_order_relaxed)) return false;
  return suspect_until_[peer].load(std::memory_order_relaxed) <= Ns(Clock::now());
}

bool PeerLink::Send(int peer, std::uint64_t id, std::vector<std::byte> request, DoneFn done) {
  if (!PeerUsable(peer)) return false;
  cache::MutexLock lock(&mutex_);
  queued_.push_back({peer, id, std::move(request), std::move(done)});
  work_.Signal();
  return true;
}

void PeerLink::WaitForWork(std::chrono::microseconds limit) {
  cache::MutexLock lock(&mutex_);
  if (queued_.empty()) work_.WaitFor(&mutex_, limit);
}

void PeerLink::Isend(int peer, int tag, std::vector<std::byte> bytes) {
  InFlight sending{MPI_REQUEST_NULL, std::make_unique<std::vector<std::byte>>(std::move(bytes))};
  MPI_Isend(sending.bytes->data(), static_cast<int>(sending.bytes->size()), MPI_BYTE, peer, tag,
            comm_, &sending.request);
  in_flight_.push_back(std::move(sending));
}

void PeerLink::MarkSuspect(int peer) {
  suspect_until_[peer].store(Ns(Clock::now() + options_.suspect_for), std::memory_order_relaxed);
}

bool PeerLink::ReceiveOne() {
  int arrived = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &arrived, &status);
  if (!arrived) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::vector<std::byte> message(static_cast<std::size_t>(std::max(count, 0)));
  MPI_Recv(message.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm_,
           MPI_STATUS_IGNORE);
  const int peer = status.MPI_SOURCE;
  switch (status.MPI_TAG) {
    case kTagRequest:
      Isend(peer, kTagReply, serve_(peer, message));
      break;
    case kTagReply: {
      const auto it = waiting_.find(ReplyId(message));
      if (it == waiting_.end() || it->second.peer != peer) break;  // late: already timed out
      DoneFn done = std::move(it->second.done);
      waiting_.erase(it);
      done(std::optional<std::vector<std::byte>>(std::move(message)));
      break;
    }
    case kTagBye:  // done reading, still serving: its rows are still asked for
      said_goodbye_[static_cast<std::size_t>(peer)] = true;
      break;
    case kTagGone:
      said_goodbye_[static_cast<std::size_t>(peer)] = true;
      gone_[peer].store(true, std::memory_order_relaxed);
      break;
    default:
      break;
  }
  return true;
}

void PeerLink::ExpireOverdue() {
  const Clock::time_point now = Clock::now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const bool gone = gone_[it->second.peer].load(std::memory_order_relaxed);
    if (it->second.deadline > now && !gone) {
      ++it;
      continue;
    }
    if (!gone) {
      MarkSuspect(it->second.peer);
      timeouts_.fetch_add(1);
    }
    DoneFn done = std::move(it->second.done);
    it = waiting_.erase(it);
    done(std::nullopt);
  }
}

bool PeerLink::Poll() {
  bool busy = false;
  std::deque<Outgoing> queued;
  {
    cache::MutexLock lock(&mutex_);
    queued.swap(queued_);
  }
  for (Outgoing& out : queued) {
    busy = true;
    if (gone_[out.peer].load(std::memory_order_relaxed)) {
      out.done(std::nullopt);
      continue;
    }
    waiting_[out.id] = {out.peer, Clock::now() + options_.timeout, std::move(out.done)};
    Isend(out.peer, kTagRequest, std::move(out.bytes));
  }
  // A bounded number of messages per poll, so queued requests and expiry
  // are not starved by a busy peer.
  for (int i = 0; i < 64 && ReceiveOne(); ++i) busy = true;
  ExpireOverdue();
  std::erase_if(in_flight_, [](InFlight& f) {
    int done = 0;
    MPI_Test(&f.request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  return busy;
}

void PeerLink::SayGoodbye() {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) Isend(peer, kTagBye, {});
  }
}

void PeerLink::SayGone() {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && !said_goodbye_[static_cast<std::size_t>(peer)]) {
      Isend(peer, kTagGone, {});
    }
  }
}

bool PeerLink::PeersDone() const {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && !said_goodbye_[static_cast<std::size_t>(peer)] && PeerUsable(peer)) {
      return false;
    }
  }
  return true;
}

bool PeerLink::Drain(std::chrono::milliseconds limit) {
  const Clock::time_point end = Clock::now() + limit;
  while (!in_flight_.empty() && Clock::now() < end) {
    Poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return in_flight_.empty();
}

}  // namespace prescient::vol::agent
