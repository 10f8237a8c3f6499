#include "engine/tokenizer/tokenizer_location.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "common/error.h"

namespace gpufrac::engine {
namespace {

namespace fs = std::filesystem;

bool has_tokenizer(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "tokenizer.json", ec);
}

}  // namespace

std::string find_qwen3_tokenizer_dir() {
  if (const char* dir = std::getenv("GPUFRAC_TOKENIZER_DIR"); dir && *dir) {
    if (!has_tokenizer(dir)) {
      throw UsageError(std::string("GPUFRAC_TOKENIZER_DIR=") + dir +
                       " has no tokenizer.json (point it at a directory holding one, or unset it)");
    }
    return dir;
  }
  std::vector<fs::path> candidates;
  if (const char* data = std::getenv("GPUFRAC_DATA_DIR"); data && *data) {
    candidates.push_back(fs::path(data) / kQwen3TokenizerSubdir);
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      candidates.push_back(dir / "third_party" / kQwen3TokenizerSubdir);
      if (dir == dir.root_path()) break;
    }
  }
  candidates.push_back(fs::path(GPUFRAC_SOURCE_DIR) / "third_party" / kQwen3TokenizerSubdir);
  for (const fs::path& dir : candidates) {
    if (has_tokenizer(dir)) return dir.string();
  }
  std::string searched;
  for (const fs::path& dir : candidates) searched += (searched.empty() ? "" : ", ") + dir.string();
  throw RuntimeFailure("no Qwen3 tokenizer.json found (searched " + searched +
                       "): run scripts/install-deps, or set GPUFRAC_TOKENIZER_DIR");
}

}  // namespace gpufrac::engine
