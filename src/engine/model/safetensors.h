// Hugging Face safetensors checkpoints, memory-mapped: one model.safetensors, or shards listed by
// model.safetensors.index.json.
//
// File format: 8-byte little-endian header length N, N bytes of JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data;
// offsets are relative to the data. open() validates everything up front (header length, JSON
// shape, dtype names, offsets inside the file, byte counts equal to shape x dtype size, no two
// tensors overlapping) and throws RuntimeFailure with one line naming the file and the tensor.
//
// Ownership: a SafetensorsFile shares its mapping; HostTensor views returned by tensor() stay
// valid while any copy of the file object, or the pointer from mapping(), is alive. Read-only
// after open(), so safe to read from many threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/tensor.h"

namespace gpufrac::engine {

// Reads a whole small file (config.json, an index) into a string; UsageError if it cannot.
std::string read_small_file(const std::string& path);

// A file mapped read-only; unmapped when the last owner lets go.
class MappedFile {
 public:
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile(const unsigned char* data, uint64_t size) : data_(data), size_(size) {}
  const unsigned char* data_;
  uint64_t size_;
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  std::vector<std::string> tensor_names() const;
  // The named tensor as a view into the mapping. Throws RuntimeFailure if it is absent or of a
  // dtype the engine does not read (anything but BF16, F16, F32).
  HostTensor tensor(const std::string& name) const;
  std::shared_ptr<const void> mapping() const { return mapping_; }

 private:
  struct Entry {
    std::string dtype;  // as the header spells it
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // absolute offsets in the file
    uint64_t end = 0;
  };
  std::string path_;
  std::shared_ptr<const MappedFile> mapping_;
  std::map<std::string, Entry> entries_;
};

class SafetensorsCheckpoint {
 public:
  // `dir` holds model.safetensors (preferred when present) or model.safetensors.index.json and
  // the shards its weight_map names. Every tensor the index lists must be in its shard.
  static SafetensorsCheckpoint open(const std::string& dir);

  bool contains(const std::string& name) const { return file_of_.count(name) != 0; }
  std::vector<std::string> tensor_names() const;
  // Throws RuntimeFailure naming the tensor and the checkpoint when it is absent.
  HostTensor tensor(const std::string& name) const;
  // The shard's path for a tensor it contains ("" when absent): for error messages.
  std::string file_of(const std::string& name) const;
  // Keep these alive as long as any returned view is used.
  std::vector<std::shared_ptr<const void>> mappings() const;

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> file_of_;  // tensor name -> index into files_
};

}  // namespace gpufrac::engine
