#include "scheduler/simulate/node_caches.h"

#include <algorithm>

namespace prescient::scheduler::simulate {

LruCache::LruCache(std::uint64_t capacity, std::uint64_t num_samples, std::uint32_t admit_every)
    : capacity_(std::min(capacity, num_samples)),
      index_(std::min(capacity, num_samples), num_samples),
      sample_(capacity_),
      prev_(capacity_),
      next_(capacity_),
      admit_every_(std::max<std::uint32_t>(1, admit_every)) {}

void LruCache::Unlink(std::uint32_t e) {
  (prev_[e] == kNil ? head_ : next_[prev_[e]]) = next_[e];
  (next_[e] == kNil ? tail_ : prev_[next_[e]]) = prev_[e];
}

void LruCache::PushFront(std::uint32_t e) {
  prev_[e] = kNil;
  next_[e] = head_;
  (head_ == kNil ? tail_ : prev_[head_]) = e;
  head_ = e;
}

bool LruCache::Read(SampleId s) {
  if (capacity_ == 0) return false;
  if (const std::uint32_t* e = index_.Find(s)) {
    if (*e != head_) {
      Unlink(*e);
      PushFront(*e);
    }
    return true;
  }
  std::uint32_t e;
  if (used_ < capacity_) {
    e = used_++;
  } else {
    if (full_misses_++ % admit_every_ != 0) return false;
    e = tail_;
    Unlink(e);
    index_.Erase(sample_[e]);
  }
  sample_[e] = s;
  index_.Insert(s, e);
  PushFront(e);
  return false;
}

BeladyCache::BeladyCache(std::uint64_t capacity, std::uint64_t num_samples,
                         std::uint64_t total_steps)
    : capacity_(std::min(capacity, num_samples)),
      key_(std::min(capacity, num_samples), num_samples),
      bucket_(capacity_ == 0 ? 0 : total_steps) {}

void BeladyCache::Push(SampleId s, std::uint32_t key) {
  if (key == kNoNextUse) {
    never_.push_back(s);
    return;
  }
  bucket_[key].push_back(s);
  top_ = std::max<std::uint64_t>(top_, key);
}

bool BeladyCache::Hit(SampleId s, std::uint32_t next_use) {
  std::uint32_t* key = key_.Find(s);
  if (key == nullptr) return false;
  *key = next_use;
  Push(s, next_use);
  return true;
}

bool BeladyCache::SettleTop() {
  while (!never_.empty()) {
    const std::uint32_t* key = key_.Find(never_.back());
    if (key != nullptr && *key == kNoNextUse) return true;
    never_.pop_back();
  }
  for (;;) {
    std::vector<SampleId>& b = bucket_[top_];
    while (!b.empty()) {
      const std::uint32_t* key = key_.Find(b.back());
      if (key != nullptr && *key == top_) return true;
      b.pop_back();
    }
    if (top_ == 0) return false;
    --top_;
  }
}

bool BeladyCache::Admit(SampleId s, std::uint32_t next_use, SampleId* evicted) {
  *evicted = kNoVictim;
  if (capacity_ == 0 || next_use == kNoNextUse) return false;
  if (size_ >= capacity_) {
    if (!SettleTop()) return false;
    const bool from_never = !never_.empty();
    const std::uint64_t furthest = from_never ? kNoNextUse : top_;
    if (furthest <= next_use) return false;  // the newcomer is the furthest
    std::vector<SampleId>& b = from_never ? never_ : bucket_[top_];
    *evicted = b.back();
    b.pop_back();
    key_.Erase(*evicted);
    --size_;
  }
  key_.Insert(s, next_use);
  ++size_;
  Push(s, next_use);
  return true;
}

void BeladyCache::EndStep(std::uint32_t now) {
  if (now < bucket_.size()) std::vector<SampleId>().swap(bucket_[now]);
}

}  // namespace prescient::scheduler::simulate
