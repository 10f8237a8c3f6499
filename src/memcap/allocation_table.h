// The process-local record of what the shim has counted: which device pointer, allocation handle,
// mapping or memory pool belongs to which device and how many bytes it holds. An open-addressing
// hash map (linear probing, backward-shift deletion) on calloc'd storage; no exceptions.
//
// Not synchronized: the shim guards each table with its own mutex. Insert only after
// reserve_one() returned true, so that recording an allocation the driver already made can never
// fail for lack of memory.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gpufrac::memcap {

struct AllocationRecord {
  uint64_t key;         // device pointer, allocation handle, mapped address or pool handle
  uint64_t bytes;       // counted bytes (mappings: the mapped size)
  uint64_t link;        // pointers: their context; mappings: the allocation handle mapped
  uint64_t tag;         // handles: a serial number; mappings: the serial of the handle mapped
  int32_t device;       // device the bytes are counted on (pools: -1 = not counted)
  uint32_t references;  // allocation handles: unreleased references (cuMemRetainAllocationHandle)
  uint32_t mappings;    // allocation handles: live cuMemMap mappings
  bool used;
};

class AllocationTable {
 public:
  constexpr AllocationTable() = default;
  AllocationTable(const AllocationTable&) = delete;
  AllocationTable& operator=(const AllocationTable&) = delete;
  ~AllocationTable();

  bool reserve_one();
  AllocationRecord* find(uint64_t key);
  // The record for `key`, zeroed if new (`*existed` tells which). Requires reserve_one().
  AllocationRecord* insert(uint64_t key, bool* existed);
  void erase(uint64_t key);
  // Forgets every record but keeps the storage (a fork child owns none of its parent's memory).
  void clear();
  size_t size() const { return size_; }

  template <typename Visit>  // Visit(const AllocationRecord&)
  void for_each(Visit visit) const {
    for (size_t i = 0; i < capacity_; ++i) {
      if (records_[i].used) visit(records_[i]);
    }
  }

 private:
  size_t home(uint64_t key) const;
  bool grow();

  AllocationRecord* records_ = nullptr;
  size_t capacity_ = 0;  // a power of two, or 0
  size_t size_ = 0;
};

}  // namespace gpufrac::memcap
