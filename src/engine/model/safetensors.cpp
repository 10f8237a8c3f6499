#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/json.h"

namespace gpufrac::engine {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot read (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw RuntimeFailure(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    throw RuntimeFailure(path + ": cannot stat (" + std::strerror(error) + ")");
  }
  uint64_t size = uint64_t(info.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      int error = errno;
      ::close(fd);
      throw RuntimeFailure(path + ": cannot mmap (" + std::strerror(error) + ")");
    }
  }
  ::close(fd);  // the mapping keeps the file
  return std::shared_ptr<const MappedFile>(
      new MappedFile(static_cast<const unsigned char*>(data), size));
}

MappedFile::~MappedFile() {
  if (size_ > 0) munmap(const_cast<unsigned char*>(data_), size_);
}

namespace {

// Element sizes of every dtype safetensors defines (0: unknown name).
uint64_t element_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2},
      {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},     {"U32", 4},     {"F32", 4},
      {"I64", 8},  {"U64", 8}, {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the format's own limit

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  file.mapping_ = MappedFile::open(path);
  const unsigned char* bytes = file.mapping_->data();
  uint64_t size = file.mapping_->size();
  auto fail = [&](const std::string& problem) -> RuntimeFailure {
    return RuntimeFailure(path + ": not a valid safetensors file: " + problem);
  };
  if (size < 8) throw fail("shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8) {
    throw fail("header length " + std::to_string(header_len) + " exceeds the file (" +
               std::to_string(size) + " bytes)");
  }
  Json header;
  try {
    header = Json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const Json::exception& e) {
    throw fail(std::string("header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw fail("header is not a JSON object");
  uint64_t data_start = 8 + header_len, data_size = size - data_start;

  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& problem) {
      return RuntimeFailure(path + ": tensor " + name + ": " + problem);
    };
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() ||
        !info.contains("shape") || !info["shape"].is_array() || !info.contains("data_offsets") ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
      throw bad("header entry needs \"dtype\" (string), \"shape\" (array) and \"data_offsets\" "
                "([begin, end]), got " + info.dump());
    }
    Entry entry;
    entry.dtype = info["dtype"].get<std::string>();
    uint64_t element = element_bytes(entry.dtype);
    if (element == 0) throw bad("unknown dtype \"" + entry.dtype + "\"");
    uint64_t count = 1;
    for (const Json& dim : info["shape"]) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0 || dim.get<int64_t>() > (1LL << 40)) {
        throw bad("shape " + info["shape"].dump() + " is not a list of sizes");
      }
      entry.shape.push_back(dim.get<int64_t>());
      if (__builtin_mul_overflow(count, uint64_t(dim.get<int64_t>()), &count) ||
          count > data_size) {
        throw bad("shape " + info["shape"].dump() + " needs more bytes than the file holds");
      }
    }
    for (const Json& offset : info["data_offsets"]) {
      if (!offset.is_number_unsigned()) {
        throw bad("data_offsets " + info["data_offsets"].dump() + " are not unsigned integers");
      }
    }
    uint64_t begin = info["data_offsets"][0].get<uint64_t>();
    uint64_t end = info["data_offsets"][1].get<uint64_t>();
    if (begin > end || end > data_size) {
      throw bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                "] fall outside the data (" + std::to_string(data_size) + " bytes)");
    }
    if (end - begin != count * element) {
      throw bad("data_offsets span " + std::to_string(end - begin) + " bytes but shape " +
                info["shape"].dump() + " of " + entry.dtype + " needs " +
                std::to_string(count * element));
    }
    entry.begin = data_start + begin;
    entry.end = data_start + end;
    file.entries_.emplace(name, std::move(entry));
  }

  std::vector<std::pair<uint64_t, const std::string*>> spans;
  for (const auto& [name, entry] : file.entries_) {
    if (entry.end > entry.begin) spans.emplace_back(entry.begin, &name);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const Entry& previous = file.entries_.at(*spans[i - 1].second);
    if (previous.end > spans[i].first) {
      throw RuntimeFailure(path + ": tensor " + *spans[i].second + ": data overlaps tensor " +
                           *spans[i - 1].second);
    }
  }
  return file;
}

std::vector<std::string> SafetensorsFile::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

HostTensor SafetensorsFile::tensor(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw RuntimeFailure(path_ + ": no tensor named " + name);
  const Entry& entry = it->second;
  HostTensor out;
  if (entry.dtype == "BF16") {
    out.dtype = DType::kBF16;
  } else if (entry.dtype == "F16") {
    out.dtype = DType::kF16;
  } else if (entry.dtype == "F32") {
    out.dtype = DType::kF32;
  } else {
    throw RuntimeFailure(path_ + ": tensor " + name + " has dtype " + entry.dtype +
                         "; the engine reads BF16, F16 and F32");
  }
  out.shape = entry.shape;
  out.data = mapping_->data() + entry.begin;
  return out;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint checkpoint;
  checkpoint.dir_ = dir;
  fs::path single = fs::path(dir) / "model.safetensors";
  fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    checkpoint.files_.push_back(SafetensorsFile::open(single.string()));
    for (const std::string& name : checkpoint.files_[0].tensor_names()) {
      checkpoint.file_of_[name] = 0;
    }
    return checkpoint;
  }
  if (!fs::exists(index_path)) {
    throw UsageError(dir + ": no model.safetensors or model.safetensors.index.json here");
  }
  std::string source = index_path.string();
  Json index;
  try {
    index = Json::parse(read_small_file(source));
  } catch (const Json::exception& e) {
    throw RuntimeFailure(source + ": not valid JSON (" + e.what() + ")");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw RuntimeFailure(source + ": field 'weight_map' is missing or not an object");
  }
  std::map<std::string, size_t> shard_index;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      throw RuntimeFailure(source + ": weight_map entry for " + name + " is not a file name");
    }
    std::string shard_name = shard.get<std::string>();
    auto known = shard_index.find(shard_name);
    if (known == shard_index.end()) {
      fs::path shard_path = fs::path(dir) / shard_name;
      if (shard_name.empty() || fs::path(shard_name).is_absolute() || !fs::exists(shard_path)) {
        throw RuntimeFailure(source + ": weight_map puts tensor " + name + " in " + shard_name +
                             ", which is not a file in " + dir);
      }
      checkpoint.files_.push_back(SafetensorsFile::open(shard_path.string()));
      known = shard_index.emplace(shard_name, checkpoint.files_.size() - 1).first;
    }
    if (!checkpoint.files_[known->second].contains(name)) {
      throw RuntimeFailure(source + ": weight_map puts tensor " + name + " in " + shard_name +
                           ", but that file has no such tensor");
    }
    checkpoint.file_of_[name] = known->second;
  }
  return checkpoint;
}

HostTensor SafetensorsCheckpoint::tensor(const std::string& name) const {
  auto it = file_of_.find(name);
  if (it == file_of_.end()) {
    throw RuntimeFailure("checkpoint " + dir_ + ": tensor " + name + " is missing");
  }
  return files_[it->second].tensor(name);
}

std::vector<std::string> SafetensorsCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : file_of_) names.push_back(name);
  return names;
}

std::string SafetensorsCheckpoint::file_of(const std::string& name) const {
  auto it = file_of_.find(name);
  return it == file_of_.end() ? "" : files_[it->second].path();
}

std::vector<std::shared_ptr<const void>> SafetensorsCheckpoint::mappings() const {
  std::vector<std::shared_ptr<const void>> out;
  for (const SafetensorsFile& file : files_) out.push_back(file.mapping());
  return out;
}

}  // namespace gpufrac::engine
