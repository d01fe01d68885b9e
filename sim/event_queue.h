#pragma once
// EventQueue: events ordered by (time, priority, insertion order), so events at the same instant
// pop in priority order and then in the order they were scheduled, independent of addresses or
// container iteration order.
//
// Events that share a (time, priority) key share one bucket, a FIFO of payloads; a binary
// min-heap orders the distinct keys and a hash table finds a key's bucket when an event is
// pushed. A training iteration schedules many events for the same instant (the members of a
// tensor-parallel group finish identical kernels together: about eight events per instant in a
// GPT-3 iteration), so the heap holds and reorders keys several times less often than one heap
// entry per event would.
// Complexity: push O(1) expected plus O(log k) for a new key, pop O(1) plus O(log k) when a
// bucket empties (k distinct keys pending), top O(1). Cancellation is lazy: the payload carries
// whatever version stamp its owner uses to recognise a stale event.

#include <cstdint>
#include <vector>

#include "sim/check.h"
#include "sim/error.h"
#include "sim/units.h"

namespace trainsim::sim {

template <typename Payload>
class EventQueue {
 public:
  struct Event {
    TimePoint time;
    std::uint32_t priority = 0;
    Payload payload{};
  };

  // REQUIRES: time is not before the time of the last popped event; priority < 256. Throws
  // ClockOverflowError past Duration::max(): every time then stays far enough from the int64
  // limit that adding one (saturated) duration to it cannot overflow.
  void push(TimePoint time, std::uint32_t priority, const Payload& payload) {
    if (time.since_start() > Duration::max()) throw ClockOverflowError("simulated time passed its range");
    TRAINSIM_CHECK(time >= now_, "event scheduled in the past");
    TRAINSIM_ASSERT(priority < 256, "event priority out of range");
    const Key key{time.ps(), priority};
    std::uint32_t b = find(key);
    if (b == kNone) {
      b = new_bucket(key);
      heap_.push_back(HeapEntry{key, b});
      sift_up(heap_.size() - 1);
    }
    buckets_[b].items.push_back(payload);
    ++size_;
  }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // REQUIRES: !empty().
  TimePoint top_time() const { return TimePoint::from_ps(heap_.front().key.time); }
  // Removes and returns the earliest event; the queue's clock advances to its time.
  Event pop() {
    TRAINSIM_CHECK(size_ > 0, "pop from an empty event queue");
    const HeapEntry top = heap_.front();
    Bucket& bucket = buckets_[top.bucket];
    Event e{TimePoint::from_ps(top.key.time), top.key.priority, bucket.items[bucket.head++]};
    --size_;
    if (bucket.head == bucket.items.size()) {  // the key's last event: retire its bucket
      erase(top.key);
      bucket.items.clear();
      bucket.head = 0;
      free_buckets_.push_back(top.bucket);
      const HeapEntry last = heap_.back();
      heap_.pop_back();
      if (!heap_.empty()) replace_top(last);
    }
    TRAINSIM_CHECK(e.time >= now_, "simulated time went backwards");
    now_ = e.time;
    return e;
  }
  TimePoint now() const { return now_; }

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  struct Key {
    std::int64_t time = 0;
    std::uint32_t priority = 0;
    bool operator==(const Key&) const = default;
  };
  struct HeapEntry {  // 16 bytes: four to a cache line
    Key key;
    std::uint32_t bucket = 0;
  };
  struct Bucket {
    std::vector<Payload> items;  // FIFO: [head, size) still to pop; capacity kept when reused
    std::size_t head = 0;
  };
  struct Slot {
    Key key;
    std::uint32_t bucket = kNone;  // kNone: empty slot
  };

  // Keys in the heap are distinct, so (time, priority) alone orders them totally. Branch-free:
  // the comparisons of a heap walk are unpredictable.
  static bool before(const Key& a, const Key& b) {
    return (a.time < b.time) | ((a.time == b.time) & (a.priority < b.priority));
  }
  void sift_up(std::size_t i) {
    const HeapEntry e = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!before(e.key, heap_[parent].key)) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  // Floyd's pop: the hole left at the root walks down to a leaf along the smaller children (one
  // comparison per level instead of two), then `e` climbs back from there, which is rarely more
  // than a level or two because it came from the bottom.
  void replace_top(const HeapEntry& e) {
    const std::size_t n = heap_.size();
    std::size_t i = 0;
    for (std::size_t child = 1; child < n; child = 2 * i + 1) {
      child += static_cast<std::size_t>(child + 1 < n && before(heap_[child + 1].key, heap_[child].key));
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = e;
    sift_up(i);
  }

  std::uint32_t new_bucket(const Key& key) {
    std::uint32_t b;
    if (!free_buckets_.empty()) {
      b = free_buckets_.back();
      free_buckets_.pop_back();
    } else {
      b = static_cast<std::uint32_t>(buckets_.size());
      buckets_.emplace_back();
    }
    if (2 * (live_keys_ + 1) > slots_.size()) grow();
    place(Slot{key, b});
    ++live_keys_;
    return b;
  }

  // Open addressing with linear probing, at most half full.
  std::size_t home(const Key& key) const {
    std::uint64_t h = static_cast<std::uint64_t>(key.time) * 0x9e3779b97f4a7c15ull + key.priority;
    h ^= h >> 29;
    return static_cast<std::size_t>(h) & (slots_.size() - 1);
  }
  // Puts `slot` in the first empty slot of its probe run. REQUIRES: the table has an empty slot.
  void place(const Slot& slot) {
    std::size_t i = home(slot.key);
    while (slots_[i].bucket != kNone) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = slot;
  }
  std::uint32_t find(const Key& key) const {
    if (slots_.empty()) return kNone;
    for (std::size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].bucket == kNone) return kNone;
      if (slots_[i].key == key) return slots_[i].bucket;
    }
  }
  // Backward-shift deletion: later entries of the probe run move up, so no tombstones build up.
  void erase(const Key& key) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = home(key);
    while (!(slots_[i].key == key && slots_[i].bucket != kNone)) i = (i + 1) & mask;
    for (std::size_t j = (i + 1) & mask; slots_[j].bucket != kNone; j = (j + 1) & mask) {
      const std::size_t h = home(slots_[j].key);
      // Slot j's entry may fill the hole at i when its home is not in the cyclic range (i, j].
      if (((j - h) & mask) >= ((j - i) & mask)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].bucket = kNone;
    --live_keys_;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{});
    for (const Slot& s : old) {
      if (s.bucket != kNone) place(s);
    }
  }

  std::vector<HeapEntry> heap_;  // one entry per pending key
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_buckets_;
  std::vector<Slot> slots_;      // key -> bucket
  std::size_t live_keys_ = 0;
  std::size_t size_ = 0;
  TimePoint now_;
};

}  // namespace trainsim::sim
