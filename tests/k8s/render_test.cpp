// `gpufrac k8s render` as a user runs it, on the example specs in docs/examples/kubernetes/:
// the files match the golden base in tests/k8s/golden/<example>/ byte for byte (rerun with
// GPUFRAC_UPDATE_GOLDEN=1 to rewrite them after a deliberate change, and review the diff), a
// second render writes the same bytes, every object validates against the Kubernetes schemas
// (kubernetes-models, validate_manifests.js), and `kubectl kustomize` builds the base.
#include <set>

#include "k8s_test_util.h"

namespace gpufrac::testing {
namespace {

std::string example(const std::string& name) {
  return source_tree() + "/docs/examples/kubernetes/" + name + ".yaml";
}
std::string golden_dir(const std::string& name) {
  return source_tree() + "/tests/k8s/golden/" + name;
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> files;
  if (!std::filesystem::exists(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    files.insert(entry.path().filename().string());
  return files;
}

CommandResult render(const std::string& spec, const std::string& out,
                     const std::string& extra = "") {
  return run_shell(std::string(GPUFRAC_BINARY) + " k8s render '" + spec + "' --out '" + out +
                   "' --image registry.example/gpufrac:1.0 " + extra);
}

std::string kubernetes_models_dir() {
  const char* data = std::getenv("GPUFRAC_DATA_DIR");
  std::string base = data && *data ? std::string(data) : source_tree() + "/third_party";
  return base + "/npm/kubernetes-models/node_modules/kubernetes-models";
}

class RenderExample : public ::testing::TestWithParam<std::string> {};

TEST_P(RenderExample, MatchesTheGoldenBaseAndRendersTheSameBytesTwice) {
  TempDir dir;
  std::string out = dir.path() + "/base";
  CommandResult first = render(example(GetParam()), out);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::set<std::string> rendered = files_in(out);
  if (std::getenv("GPUFRAC_UPDATE_GOLDEN")) {
    std::filesystem::remove_all(golden_dir(GetParam()));
    std::filesystem::create_directories(golden_dir(GetParam()));
    for (const std::string& f : rendered)
      std::filesystem::copy_file(out + "/" + f, golden_dir(GetParam()) + "/" + f);
  }
  ASSERT_EQ(rendered, files_in(golden_dir(GetParam())));
  for (const std::string& f : rendered) {
    EXPECT_EQ(read_file(out + "/" + f), read_file(golden_dir(GetParam()) + "/" + f))
        << f << " differs from the golden file";
  }
  std::string again = dir.path() + "/again";
  ASSERT_EQ(render(example(GetParam()), again).exit_code, 0);
  for (const std::string& f : rendered)
    EXPECT_EQ(read_file(again + "/" + f), read_file(out + "/" + f)) << f;
}

TEST_P(RenderExample, EveryObjectValidatesAgainstTheKubernetesSchemas) {
  const std::string package = kubernetes_models_dir();
  ASSERT_TRUE(std::filesystem::exists(package + "/package.json"))
      << package << " is missing: run scripts/install-deps";
  TempDir dir;
  std::string out = dir.path() + "/base";
  ASSERT_EQ(render(example(GetParam()), out).exit_code, 0);
  std::string files;
  for (const std::string& f : files_in(out)) {
    YAML::Node node = YAML::LoadFile(out + "/" + f);
    std::string json = dir.path() + "/" + f + ".json";
    write_file(json, yaml_to_json(node).dump());
    files += " '" + json + "'";
  }
  CommandResult check = run_shell("node '" + source_tree() + "/tests/k8s/validate_manifests.js' '" +
                                  package + "'" + files);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(check.output.find("FAIL"), std::string::npos) << check.output;
}

TEST_P(RenderExample, KubectlKustomizeBuildsTheBase) {
  if (run_shell("command -v kubectl").exit_code != 0)
    GTEST_SKIP() << "kubectl is not installed here";
  TempDir dir;
  std::string out = dir.path() + "/base";
  ASSERT_EQ(render(example(GetParam()), out).exit_code, 0);
  CommandResult built = run_shell("kubectl kustomize '" + out + "'");
  ASSERT_EQ(built.exit_code, 0) << built.output;
  std::vector<YAML::Node> objects = YAML::LoadAll(built.output);
  EXPECT_EQ(objects.size(), files_in(out).size() - 1);  // every file but kustomization.yaml
  std::set<std::string> kinds;
  for (const YAML::Node& o : objects) kinds.insert(o["kind"].as<std::string>());
  EXPECT_EQ(kinds, (std::set<std::string>{"DaemonSet", "Deployment", "Namespace", "NetworkPolicy",
                                          "Queue", "Service"}));
}

INSTANTIATE_TEST_SUITE_P(Examples, RenderExample,
                         ::testing::Values("two-models", "mixed", "timeslice"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::erase(name, '-');
                           return name;
                         });

TEST(RenderCommand, SpecErrorsAreTheOnesGpufracUpGives) {
  TempDir dir;
  std::string spec = dir.path() + "/bad.yaml";
  write_file(spec,
             "name: x\nmodels:\n  - name: a\n    model: tiny\n    fraction: {compute: 1.5, memory: "
             "0.5}\n");
  CommandResult k8s = render(spec, dir.path() + "/out");
  CommandResult up = run_shell(std::string(GPUFRAC_BINARY) + " up '" + spec + "'");
  EXPECT_EQ(k8s.exit_code, 2);
  std::string k8s_line = k8s.output.substr(k8s.output.find(": ") + 2);
  std::string up_line = up.output.substr(up.output.find(": ") + 2);
  EXPECT_EQ(k8s_line, up_line);
  EXPECT_NE(k8s_line.find("bad.yaml:5: models[0].fraction.compute"), std::string::npos)
      << k8s.output;
}

TEST(RenderCommand, RemovesFilesOfAPreviousRenderOnly) {
  TempDir dir;
  std::string out = dir.path() + "/base";
  ASSERT_EQ(render(example("mixed"), out).exit_code, 0);
  write_file(out + "/notes.txt", "mine\n");
  ASSERT_TRUE(std::filesystem::exists(out + "/model-mixed-qwen-qwen3-4b-deployment.yaml"));
  ASSERT_EQ(render(example("two-models"), out).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(out + "/model-mixed-qwen-qwen3-4b-deployment.yaml"));
  EXPECT_TRUE(std::filesystem::exists(out + "/model-demo-qwen-a-deployment.yaml"));
  EXPECT_EQ(read_file(out + "/notes.txt"), "mine\n");
}

TEST(RenderCommand, RefusesANamespaceThatIsNoKubernetesName) {
  TempDir dir;
  CommandResult result = render(example("two-models"), dir.path() + "/out", "--namespace My_NS");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "gpufrac k8s render: --namespace: 'My_NS' is not a Kubernetes name; use lowercase "
            "letters, digits and "
            "'-', starting with a letter, like 'my-ns'\n");
}

}  // namespace
}  // namespace gpufrac::testing
