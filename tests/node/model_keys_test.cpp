// The keys of a node spec's models from the spec, a file and a variable; the one-line errors of a
// missing file, an unset or empty variable and a file without keys (never quoting a key); the
// variables kept from engines; the 0600 key file.
#include "node/model_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "common/error.h"
#include "node_test_util.h"

namespace gpufrac {
namespace {

NodeSpec spec_of(const std::string& models) {
  return parse_node_spec("models:\n" + models, "node.yaml");
}
std::string error_of(const NodeSpec& spec, size_t model) {
  try {
    resolve_model_keys(spec, model);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelKeys, TheSpecTheFileAndTheVariableTogether) {
  testing::TempDir dir;
  testing::write_file(dir.path() + "/a.keys", "# team a\nfile-1\nfile-2, file-3\n");
  ::setenv("GFN_KEYS_TEST_A", "env-1 env-2", 1);
  NodeSpec spec =
      spec_of("  - {name: a, model: tiny, api_keys: [spec-1], api_keys_file: " + dir.path() +
              "/a.keys, api_keys_env: GFN_KEYS_TEST_A}\n"
              "  - {name: b, model: tiny, api_keys_env: GFN_KEYS_TEST_A}\n");
  EXPECT_EQ(resolve_model_keys(spec, 0),
            (std::vector<std::string>{"spec-1", "file-1", "file-2", "file-3", "env-1", "env-2"}));
  EXPECT_EQ(resolve_model_keys(spec, 1), (std::vector<std::string>{"env-1", "env-2"}));
  EXPECT_EQ(key_variables(spec), std::vector<std::string>{"GFN_KEYS_TEST_A"});
  ::unsetenv("GFN_KEYS_TEST_A");
  EXPECT_TRUE(resolve_model_keys(spec_of("  - {name: a, model: tiny}\n"), 0).empty());
}

TEST(ModelKeys, ErrorsNameTheFieldAndTheFixInOneLine) {
  testing::TempDir dir;
  ::unsetenv("GFN_KEYS_TEST_UNSET");
  std::string unset =
      error_of(spec_of("  - {name: a, model: tiny, api_keys_env: GFN_KEYS_TEST_UNSET}\n"), 0);
  EXPECT_NE(unset.find("node.yaml: models[0].api_keys_env: $GFN_KEYS_TEST_UNSET is not set"),
            std::string::npos)
      << unset;
  ::setenv("GFN_KEYS_TEST_EMPTY", " , ", 1);
  std::string empty =
      error_of(spec_of("  - {name: a, model: tiny, api_keys_env: GFN_KEYS_TEST_EMPTY}\n"), 0);
  EXPECT_NE(empty.find("is empty; export it"), std::string::npos) << empty;
  ::unsetenv("GFN_KEYS_TEST_EMPTY");
  std::string missing =
      error_of(spec_of("  - {name: a, model: tiny, api_keys_file: " + dir.path() + "/none}\n"), 0);
  EXPECT_NE(missing.find("models[0].api_keys_file: cannot read"), std::string::npos) << missing;
  testing::write_file(dir.path() + "/comments", "# nothing here\n\n");
  std::string no_key = error_of(
      spec_of("  - {name: a, model: tiny, api_keys_file: " + dir.path() + "/comments}\n"), 0);
  EXPECT_NE(no_key.find("holds no key"), std::string::npos) << no_key;
  testing::write_file(dir.path() + "/bad", "fine\nnot\x7f-fine-secret\n");
  std::string bad =
      error_of(spec_of("  - {name: a, model: tiny, api_keys_file: " + dir.path() + "/bad}\n"), 0);
  EXPECT_NE(bad.find("key 2 has a character"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("secret"), std::string::npos) << bad;
  for (const std::string& m : {unset, empty, missing, no_key, bad})
    EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST(ModelKeys, TheKeyFileIsReadableByItsOwnerOnly) {
  testing::TempDir dir;
  std::string path = dir.path() + "/engine-key";
  testing::write_file(path, "old");
  ::chmod(path.c_str(), 0644);
  write_key_file(path, "0123abcd");
  EXPECT_EQ(testing::read_file(path), "0123abcd\n");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_THROW(write_key_file(dir.path() + "/no/such/dir/key", "k"), RuntimeFailure);
}

}  // namespace
}  // namespace gpufrac
