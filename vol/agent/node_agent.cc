#include "vol/agent/node_agent.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "cache/core/process_identity.h"
#include "scheduler/plan/schedule_file_view.h"
#include "vol/agent/peer_protocol.h"
#include "vol/runtime/runtime.h"
#include "vol/schedule/dataset_resolver.h"
#include "vol/schedule/node_ownership.h"
#include "vol/serve/cache_client.h"

namespace prescient::vol::agent {
namespace {

using std::chrono::milliseconds;

constexpr auto kJobCheckPeriod = milliseconds(250);
// Nobody but the agent holding the segment this long (after the job was
// seen): it ended.
constexpr auto kJobGoneAfter = std::chrono::seconds(5);
// Between polls that found nothing: short while replies are awaited (a peer
// answers within a few hundred microseconds), longer when idle (a peer's
// first request then waits up to this; requests of our own wake us at once).
constexpr auto kAwaitingPollMax = std::chrono::microseconds(100);
constexpr auto kIdlePollMax = std::chrono::microseconds(2000);

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t unit) {
  return unit == 0 ? value : (value + unit - 1) / unit * unit;
}

}  // namespace

NodeAgent::NodeAgent(MPI_Comm comm, const AgentFlags& flags)
    : comm_(comm), flags_(flags), started_(std::chrono::steady_clock::now()) {}

NodeAgent::~NodeAgent() {
  // The prefetch thread uses the link and the peer rows: it goes first.
  if (follower_) follower_->Stop();
  if (cache_ && published_) {
    NodeOwnership::Withdraw(NodeOwnership::PathFor(cache_->path()), cache::SelfIdentity());
  }
  follower_.reset();
  peer_rows_.reset();
  link_.reset();
  datasets_.clear();
  cache_.reset();
}

std::pair<std::unique_ptr<NodeAgent>, std::string> NodeAgent::Start(MPI_Comm comm,
                                                                    const AgentFlags& flags) {
  std::unique_ptr<NodeAgent> agent(new NodeAgent(comm, flags));
  std::string error;
  try {
    error = agent->Setup();
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Every agent learns whether all could start: placement is collective.
  int ok = error.empty() ? 1 : 0;
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  if (error.empty() && all_ok == 1) {
    try {
      error = agent->PlaceSamples();
    } catch (const std::exception& e) {
      error = e.what();
    }
  } else if (error.empty()) {
    error = "another node's agent could not start (see its message)";
  }
  if (!error.empty()) return {nullptr, error};
  return {std::move(agent), ""};
}

std::string NodeAgent::Setup() {
  Runtime& runtime = Runtime::Get();
  Options options = runtime.options();
  if (!options.enable || !options.cache_enabled) {
    return "Prescient or its cache is turned off (PRESCIENT_ENABLE / PRESCIENT_CACHE)";
  }
  if (options.schedule_path.empty()) {
    return "PRESCIENT_SCHEDULE is not set: the agent places samples on nodes by the schedule";
  }
  if (options.follow) {
    return "PRESCIENT_FOLLOW is set: the agent needs a schedule file written before the job "
           "(prescient-schedule, or prescient.schedule_for), not one followed at run time";
  }
  schedule_ = std::make_shared<const scheduler::ScheduleReader>(
      scheduler::ScheduleReader::Open(options.schedule_path));
  const scheduler::WorldLayout layout = schedule_->header().layout;
  int agents = 1;
  int agent_rank = 0;
  MPI_Comm_size(comm_, &agents);
  MPI_Comm_rank(comm_, &agent_rank);
  if (static_cast<std::uint32_t>(agents) != layout.nodes()) {
    return "the schedule has " + std::to_string(layout.nodes()) + " nodes (" +
           std::to_string(layout.ranks) + " ranks, " + std::to_string(layout.ranks_per_node) +
           " per node) but " + std::to_string(agents) +
           " agents were started: start one per node (mpirun --map-by ppr:1:node, srun "
           "--ntasks-per-node=1)";
  }
  node_ = flags_.node_index.value_or(static_cast<std::uint32_t>(agent_rank));
  if (node_ >= layout.nodes())
    return "--node-index " + std::to_string(node_) + " is past the schedule's nodes";
  options.rank = node_ * layout.ranks_per_node;  // the node's first rank: the binding's node
  std::shared_ptr<ScheduleBinding> binding = ScheduleFollower::OpenBinding(options);
  if (!binding)
    return "PRESCIENT_SCHEDULE " + options.schedule_path + " cannot be used (see above)";

  cache::CacheOptions cache_options = CacheClient::SegmentOptions(options, binding.get());
  // Its loads are each row's one read from storage (or a peer's copy) for the
  // node: the training processes wait for them rather than read the rows too.
  cache_options.claims_awaited_in_full = true;
  cache::Result<std::unique_ptr<cache::NodeCache>> opened = cache::NodeCache::Open(cache_options);
  if (!opened.ok()) return "the node cache is unavailable: " + opened.status().message();
  cache_ = std::move(opened.value());
  for (const std::string& notice : cache_->notices()) runtime.Log(LogLevel::kWarn, notice);
  follower_ = ScheduleFollower::Create(std::move(binding), options, *cache_,
                                       [](std::shared_ptr<CachedDataset> prepared) {
                                         return prepared;  // PrepareDatasets registers them
                                       });
  return PrepareDatasets();
}

std::string NodeAgent::PrepareDatasets() {
  Runtime& runtime = Runtime::Get();
  const scheduler::SampleMap& map = follower_->binding().map();
  std::uint64_t prepared = 0;
  for (std::uint32_t f = 0; f < map.files().size(); ++f) {
    for (std::uint32_t j = 0; j < map.fields().size(); ++j) {
      const std::string path(map.PlaceOf(f, j).path);
      const std::string name = map.DatasetOf(f, j);
      auto resolved = DatasetResolver::Resolve(path, name, /*only_hdf5_thread=*/true);
      if (!resolved.ok()) {
        runtime.Log(LogLevel::kWarn, "node agent: " + resolved.status().message() +
                                         "; its rows are read by the training processes");
        continue;
      }
      std::shared_ptr<CachedDataset> dataset = resolved.value();
      const std::pair<std::uint64_t, std::uint64_t> key{dataset->key().hi, dataset->key().lo};
      auto [it, fresh] = datasets_.try_emplace(key, dataset);
      if (!fresh) continue;
      const cache::Status status =
          dataset->Register(*cache_, runtime.options().cache.block_bytes,
                            runtime.options().coalesce_gap, MissReadWindowBytes(runtime.options()));
      if (!status.ok()) {
        runtime.Log(LogLevel::kWarn,
                    "node agent: not caching " + dataset->description() + ": " + status.message());
        continue;
      }
      follower_->OnRegistered(dataset);
      ++prepared;
    }
  }
  DatasetResolver::ReleaseFiles();
  if (prepared == 0) return "no dataset of the schedule's sample map could be prepared";
  runtime.Log(LogLevel::kInfo, "node agent: " + std::to_string(prepared) + " datasets prepared");
  return "";
}

std::string NodeAgent::PlaceSamples() {
  Runtime& runtime = Runtime::Get();
  const ScheduleBinding& binding = follower_->binding();
  // What one sample occupies in the cache: every field's row in whole blocks
  // (fields cached several rows to an entry are small enough to leave out).
  const std::uint64_t block = runtime.options().cache.block_bytes;
  std::vector<std::uint64_t> field_bytes(binding.map().fields().size(), 0);
  for (const auto& [key, dataset] : datasets_) {
    const std::optional<FieldRef> ref = follower_->FieldRefOf(*dataset);
    if (ref && dataset->registered() && !dataset->grouped())
      field_bytes[ref->field] = RoundUp(dataset->row_bytes(), block);
  }
  std::uint64_t slot_bytes = 0;
  for (std::uint64_t b : field_bytes) slot_bytes += b;
  unsigned long long cache_samples =
      slot_bytes == 0 ? 0 : cache_->Stats().capacity_bytes / slot_bytes;
  // Every agent must place the same way: the smallest cache decides.
  unsigned long long smallest = 0;
  MPI_Allreduce(&cache_samples, &smallest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm_);
  owners_ = scheduler::plan::AssignOwners(scheduler::plan::ViewOfFile(schedule_), smallest);

  std::vector<std::uint64_t> bits((owners_.num_samples() + 63) / 64, 0);
  for (std::uint64_t s = 0; s < owners_.num_samples(); ++s) {
    if (owners_.Owner(static_cast<scheduler::SampleId>(s)) == node_)
      bits[s / 64] |= std::uint64_t{1} << (s % 64);
  }
  // The node's prefetching first: ranks start reading once the ownership is
  // published, and one that became the leader in between would read ahead
  // from storage rows other nodes own, to the end of its round (one of the
  // agent tests' runs read 1.3 times the samples that way).
  (void)cache_->TakeLeadership();
  const cache::Status published =
      NodeOwnership::Publish(NodeOwnership::PathFor(cache_->path()), node_, owners_.num_samples(),
                             bits, cache::SelfIdentity());
  if (!published.ok()) return "node agent: " + published.message();
  published_ = true;
  runtime.Log(LogLevel::kInfo, "node agent: node " + std::to_string(node_) + " owns " +
                                   std::to_string(owners_.OwnedBy(node_)) + " of " +
                                   std::to_string(owners_.num_samples()) + " samples (at most " +
                                   std::to_string(owners_.budget()) + " per node of " +
                                   std::to_string(smallest) + "; " +
                                   std::to_string(owners_.unowned()) + " samples have no owner)");

  link_ = std::make_unique<PeerLink>(
      comm_, PeerLink::Options{.timeout = flags_.peer_timeout},
      [this](int peer, std::span<const std::byte> message) { return Serve(peer, message); });
  peer_rows_ = std::make_unique<PeerRows>(*cache_, *follower_, owners_, *link_);
  follower_->RunAsNodeAgent(peer_rows_.get(), owners_.OwnedBy(node_));
  return "";
}

std::vector<std::byte> NodeAgent::Serve(int peer, std::span<const std::byte> message) {
  try {
    return ServeRequest(message);
  } catch (const std::exception& e) {
    // Out of memory for a reply, say: the requester times out and reads
    // the rows from storage; this agent goes on serving.
    Runtime::Get().Log(LogLevel::kWarn, "node agent: a request of agent " + std::to_string(peer) +
                                            " was not answered: " + e.what());
    return {};
  }
}

std::vector<std::byte> NodeAgent::ServeRequest(std::span<const std::byte> message) {
  const std::optional<RowRequest> request = DecodeRequest(message);
  if (!request) return {};  // not ours to answer: the requester times out
  const ScheduleBinding& binding = follower_->binding();
  if (request->file >= binding.map().files().size() ||
      request->field >= binding.map().fields().size()) {
    return EncodeRefusal(*request);
  }
  const std::shared_ptr<CachedDataset> dataset =
      follower_->DatasetFor({request->file, request->field}, /*resolve=*/false);
  // Only the very file the requester reads, unchanged since it was prepared.
  if (!dataset || !dataset->registered() || dataset->grouped() ||
      dataset->row_bytes() != request->row_bytes ||
      dataset->file_identity().size != request->file_size ||
      dataset->file_identity().mtime_ns != request->file_mtime_ns || dataset->FileChanged() ||
      request->rows.back() >= dataset->num_rows()) {
    return EncodeRefusal(*request);
  }
  std::vector<std::byte> data(request->rows.size() * request->row_bytes);
  LoadCounters load;
  cache::ReadRowsStats read;
  const cache::Status status = cache_->ReadRows(
      dataset->slot(), request->rows, data.data(),
      [&](std::span<const std::uint64_t> rows, std::span<std::byte* const> dest) {
        return dataset->LoadEntries(nullptr, rows, dest, &load);
      },
      follower_->oracle(), &read);
  if (!status.ok()) return EncodeRefusal(*request);
  // Counted in the epoch this node is in (the requester's is not known).
  const std::uint64_t total = binding.total_steps();
  const std::uint32_t epoch =
      total == 0 ? 0 : binding.EpochAndStep(std::min(cache_->NodeStep(), total - 1)).first;
  Stats& stats = Runtime::Get().stats();
  stats.AddInEpoch(epoch, Counter::kRowsServed, request->rows.size());
  stats.AddInEpoch(epoch, Counter::kRowsLoaded, read.loaded);
  stats.AddInEpoch(epoch, Counter::kStorageReads, load.reads);
  stats.AddInEpoch(epoch, Counter::kStorageBytes, load.bytes);
  if (const std::optional<std::uint32_t> field = follower_->FieldOf(*dataset)) {
    stats.AddField(*field, FieldCounter::kRowsServed, request->rows.size());
    stats.AddField(*field, FieldCounter::kRowsLoaded, read.loaded);
  }
  return EncodeReply(*request, data);
}

bool NodeAgent::JobOver() {
  const ScheduleBinding& binding = follower_->binding();
  bool any = false;
  bool all_finished = true;
  for (const cache::NodeCache::ParticipantProgress& p : cache_->Participants()) {
    if (!binding.LocalIndex(p.participant)) {
      if (!warned_foreign_) {
        warned_foreign_ = true;
        Runtime::Get().Log(LogLevel::kWarn,
                           "node agent: rank " + std::to_string(p.participant) +
                               " reads on this node, but this agent serves the schedule's node " +
                               std::to_string(node_) +
                               ": start the agents in the job's node order, or pass --node-index");
      }
      continue;
    }
    any = true;
    all_finished = all_finished && p.finished;
  }
  const auto now = std::chrono::steady_clock::now();
  saw_job_ = saw_job_ || any;
  if (!saw_job_) {
    if (now - started_ < flags_.wait_for_job) return false;
    Runtime::Get().Log(LogLevel::kWarn, "node agent: no rank of node " + std::to_string(node_) +
                                            " read within --wait-for-job; exiting");
    return true;
  }
  if (all_finished) return true;
  // A rank's processes come and go (DataLoader workers each epoch), but its
  // training process stays attached, or a keeper holds the segment for it,
  // while the job runs: nobody holding it for a while means the job ended.
  // (Attach records alone are not enough: a training process that opens its
  // files only in its workers never attaches, and between two generations of
  // workers nobody is attached for as long as a validation pass takes.)
  if (cache_->OthersHold()) {
    last_held_ = now;
    return false;
  }
  return now - last_held_ >= kJobGoneAfter;
}

void NodeAgent::Run(const std::atomic<bool>& stop) {
  auto idle = std::chrono::microseconds(20);
  auto next_check = std::chrono::steady_clock::now();
  bool over = false;
  while (!stop.load() && !over) {
    if (link_->Poll()) {
      idle = std::chrono::microseconds(20);
    } else {
      link_->WaitForWork(idle);
      idle = std::min(idle * 2, link_->AwaitingReplies() ? kAwaitingPollMax : kIdlePollMax);
    }
    if (std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + kJobCheckPeriod;
      over = JobOver();
    }
    node_snapshot_.MaybeTake(*cache_, Runtime::Get().stats());
  }
  // Stop prefetching while still answering (the prefetch thread may be
  // waiting for replies the link delivers), then say goodbye and keep
  // serving until every peer is done too: ranks of other nodes still read
  // the rows this node owns (a node whose ranks finish a few seconds early,
  // e.g. because its DataLoader workers started sooner, is the common case,
  // and its peers read its rows from storage if it stops serving).
  follower_->RequestStop();
  while (!follower_->Idle()) {
    if (!link_->Poll()) std::this_thread::sleep_for(kIdlePollMax);
  }
  cache_->ResignLeader();
  link_->SayGoodbye();
  // Peers whose ranks are still reading need this node's rows; a peer that
  // never finishes (stopped) is not waited for beyond --wait-for-job.
  const auto linger_until = std::chrono::steady_clock::now() + flags_.wait_for_job;
  while (!link_->PeersDone() && !stop.load() && std::chrono::steady_clock::now() < linger_until) {
    if (!link_->Poll()) std::this_thread::sleep_for(kIdlePollMax);
  }
  if (!link_->PeersDone()) link_->SayGone();
  node_snapshot_.Take(*cache_, Runtime::Get().stats());
}

bool NodeAgent::Drained() { return link_->Drain(milliseconds(2000)); }

}  // namespace prescient::vol::agent
