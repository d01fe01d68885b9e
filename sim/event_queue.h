#pragma once
// EventQueue: a binary min-heap on std::vector keyed (time, priority, insertion sequence), so
// events at the same instant pop in priority order and then in the order they were scheduled,
// independent of addresses or container iteration order.
// Complexity: push O(log n), pop O(log n), top O(1). Cancellation is lazy: the payload carries
// whatever version stamp its owner uses to recognise a stale event.

#include <cstdint>
#include <vector>

#include "sim/check.h"
#include "sim/units.h"

namespace trainsim::sim {

template <typename Payload>
class EventQueue {
 public:
  struct Event {
    TimePoint time;
    std::uint64_t order = 0;  // priority in the top 8 bits, insertion sequence below
    Payload payload{};
    std::uint32_t priority() const { return static_cast<std::uint32_t>(order >> 56); }
    std::uint64_t sequence() const { return order & ((std::uint64_t{1} << 56) - 1); }
  };

  // REQUIRES: time is not before the time of the last popped event; priority < 256. Throws
  // ClockOverflowError past Duration::max(): every time then stays far enough from the int64
  // limit that adding one (saturated) duration to it cannot overflow.
  void push(TimePoint time, std::uint32_t priority, const Payload& payload) {
    if (time.since_start() > Duration::max()) throw ClockOverflowError("simulated time passed its range");
    TRAINSIM_CHECK(time >= now_, "event scheduled in the past");
    TRAINSIM_ASSERT(priority < 256, "event priority out of range");
    heap_.push_back(Event{time, (std::uint64_t{priority} << 56) | next_sequence_++, payload});
    sift_up(heap_.size() - 1);
  }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  // Removes and returns the earliest event; the queue's clock advances to its time.
  Event pop() {
    TRAINSIM_CHECK(!heap_.empty(), "pop from an empty event queue");
    Event e = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    TRAINSIM_CHECK(e.time >= now_, "simulated time went backwards");
    now_ = e.time;
    return e;
  }
  TimePoint now() const { return now_; }
  std::uint64_t pushed() const { return next_sequence_; }
  void reserve(std::size_t n) { heap_.reserve(n); }

 private:
  static bool before(const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    return a.order < b.order;
  }
  void sift_up(std::size_t i) {
    Event e = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }
  void sift_down(std::size_t i) {
    const std::size_t n = heap_.size();
    Event e = heap_[i];
    while (true) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], e)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  std::uint64_t next_sequence_ = 0;
  TimePoint now_;
};

}  // namespace trainsim::sim
