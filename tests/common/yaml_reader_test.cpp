// YamlReader::check_keys: unknown and repeated keys are one-line errors naming file, line and field.
#include "common/yaml_reader.h"

#include <gtest/gtest.h>

namespace gpufrac {
namespace {

std::string check_error(const std::string& yaml) {
  YamlReader reader("spec.yaml");
  YAML::Node root = reader.load(yaml);
  try {
    reader.check_keys(root, "", {"name", "mode"});
    reader.check_keys(root["mode"], "mode", {"arm", "share"});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(YamlReaderCheckKeys, AcceptsKnownKeysOnce) {
  EXPECT_EQ(check_error("name: a\nmode: {arm: x, share: 1}\n"), "");
}

TEST(YamlReaderCheckKeys, RejectsAKeyGivenTwice) {
  EXPECT_EQ(check_error("name: a\nmode: {arm: x}\nname: b\n"), "spec.yaml:3: name: is given twice; keep one");
  EXPECT_EQ(check_error("name: a\nmode:\n  arm: x\n  arm: y\n"),
            "spec.yaml:4: mode.arm: is given twice; keep one");
}

TEST(YamlReaderCheckKeys, RejectsAnUnknownKeyListingTheKnownOnes) {
  EXPECT_EQ(check_error("name: a\nmodes: {}\n"),
            "spec.yaml:2: modes: unknown field; use one of: name, mode");
}

}  // namespace
}  // namespace gpufrac
