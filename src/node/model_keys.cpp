#include "node/model_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/api_key.h"
#include "common/error.h"

namespace gpufrac {

std::vector<std::string> resolve_model_keys(const NodeSpec& spec, size_t index) {
  const ModelSpec& model = spec.models.at(index);
  std::string field = spec.source + ": models[" + std::to_string(index) + "].";
  std::vector<std::string> keys = model.api_keys;
  if (!model.api_keys_file.empty()) {
    std::string where = field + "api_keys_file";
    std::ifstream in(model.api_keys_file);
    if (!in) {
      throw UsageError(where + ": cannot read " + model.api_keys_file + " (" +
                       std::strerror(errno) + "); fix the path or the file's permissions");
    }
    std::stringstream text;
    text << in.rdbuf();
    std::vector<std::string> from_file =
        parse_api_keys(text.str(), where + " " + model.api_keys_file);
    if (from_file.empty()) {
      throw UsageError(where + ": " + model.api_keys_file +
                       " holds no key; write the keys that may call '" + model.name +
                       "' in it, separated by commas or newlines");
    }
    keys.insert(keys.end(), from_file.begin(), from_file.end());
  }
  if (!model.api_keys_env.empty()) {
    std::string where = field + "api_keys_env";
    const char* text = std::getenv(model.api_keys_env.c_str());
    std::vector<std::string> from_env =
        text ? parse_api_keys(text, where + " $" + model.api_keys_env) : std::vector<std::string>{};
    if (from_env.empty()) {
      throw UsageError(where + ": $" + model.api_keys_env + " is " + (text ? "empty" : "not set") +
                       "; export it with the keys that may call '" + model.name +
                       "', separated by commas");
    }
    keys.insert(keys.end(), from_env.begin(), from_env.end());
  }
  return keys;
}

std::vector<std::string> key_variables(const NodeSpec& spec) {
  std::vector<std::string> names;
  for (const ModelSpec& model : spec.models) {
    if (!model.api_keys_env.empty() &&
        std::find(names.begin(), names.end(), model.api_keys_env) == names.end()) {
      names.push_back(model.api_keys_env);
    }
  }
  return names;
}

void write_key_file(const std::string& path, const std::string& key) {
  std::string temporary = path + ".new";
  ::unlink(temporary.c_str());
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  std::string line = key + "\n";
  bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
            ::write(fd, line.data(), line.size()) == ssize_t(line.size());
  int error = errno;
  if (fd >= 0) ::close(fd);
  if (!ok || ::rename(temporary.c_str(), path.c_str()) != 0) {
    if (ok) error = errno;
    ::unlink(temporary.c_str());
    throw RuntimeFailure("cannot write " + path + ": " + std::strerror(error));
  }
}

}  // namespace gpufrac
