#include "memcap/allocation_table.h"

#include <stdlib.h>
#include <string.h>

namespace gpufrac::memcap {

namespace {
constexpr size_t kInitialCapacity = 256;
}

AllocationTable::~AllocationTable() {
  free(records_);
}

size_t AllocationTable::home(uint64_t key) const {
  uint64_t x = key + 0x9e3779b97f4a7c15ull;  // splitmix64 finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return size_t(x) & (capacity_ - 1);
}

bool AllocationTable::grow() {
  size_t capacity = capacity_ == 0 ? kInitialCapacity : capacity_ * 2;
  auto* records = static_cast<AllocationRecord*>(calloc(capacity, sizeof(AllocationRecord)));
  if (records == nullptr) return false;
  AllocationRecord* old = records_;
  size_t old_capacity = capacity_;
  records_ = records;
  capacity_ = capacity;
  size_ = 0;
  for (size_t i = 0; i < old_capacity; ++i) {
    if (!old[i].used) continue;
    bool existed = false;
    *insert(old[i].key, &existed) = old[i];
  }
  free(old);
  return true;
}

bool AllocationTable::reserve_one() {
  return (size_ + 1) * 2 <= capacity_ || grow();
}

AllocationRecord* AllocationTable::find(uint64_t key) {
  if (capacity_ == 0) return nullptr;
  for (size_t i = home(key);; i = (i + 1) & (capacity_ - 1)) {
    if (!records_[i].used) return nullptr;
    if (records_[i].key == key) return &records_[i];
  }
}

AllocationRecord* AllocationTable::insert(uint64_t key, bool* existed) {
  for (size_t i = home(key);; i = (i + 1) & (capacity_ - 1)) {
    AllocationRecord& record = records_[i];
    if (record.used && record.key == key) {
      *existed = true;
      return &record;
    }
    if (!record.used) {
      memset(&record, 0, sizeof record);
      record.used = true;
      record.key = key;
      ++size_;
      *existed = false;
      return &record;
    }
  }
}

void AllocationTable::erase(uint64_t key) {
  AllocationRecord* found = find(key);
  if (found == nullptr) return;
  const size_t mask = capacity_ - 1;
  size_t hole = size_t(found - records_);
  // Backward shift: pull later entries of the probe run into the hole so no tombstones remain.
  for (size_t next = (hole + 1) & mask; records_[next].used; next = (next + 1) & mask) {
    size_t want = home(records_[next].key);
    bool movable = hole <= next ? (want <= hole || want > next) : (want <= hole && want > next);
    if (movable) {
      records_[hole] = records_[next];
      hole = next;
    }
  }
  records_[hole].used = false;
  --size_;
}

void AllocationTable::clear() {
  if (records_ != nullptr) memset(records_, 0, capacity_ * sizeof(AllocationRecord));
  size_ = 0;
}

}  // namespace gpufrac::memcap
