#include "k8s/render_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "common/cli_args.h"
#include "common/error.h"
#include "k8s/kube_names.h"
#include "k8s/manifests.h"

namespace gpufrac::k8s {
namespace {

bool written_by_render(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string first;
  return std::getline(in, first) && first.starts_with(kRenderedHeader);
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw RuntimeFailure("cannot write " + path.string());
}

void check_name(const std::string& flag, const std::string& value) {
  if (kube_label(value) != value) {
    throw UsageError("--" + flag + ": '" + value +
                     "' is not a Kubernetes name; use lowercase letters, digits " +
                     "and '-', starting with a letter, like '" + kube_label(value) + "'");
  }
}

}  // namespace

int render_command(int argc, char** argv) {
  CliArgs args(
      "gpufrac k8s render SPEC --out DIR [OPTIONS]",
      "Writes a node spec (the file `gpufrac up` reads) as a kustomize base for a Kubernetes\n"
      "cluster scheduled by KAI-Scheduler: per model a Deployment (KAI's gpu-fraction or\n"
      "gpu-memory annotation, gpufrac/sm-share, `gpufrac k8s exec` as the entrypoint) and a\n"
      "Service, the router (one address for every model), the node agent's DaemonSet (one\n"
      "MPS daemon per GPU), a KAI Queue and the Namespace. Same spec, same bytes.\n"
      "See docs/kubernetes.md.");
  args.positional("SPEC",
                  "The node spec (YAML); docs/node.md and docs/kubernetes.md list its fields.")
      .option("out", "DIR", "Where to write the base (created when missing).")
      .option("image", "IMAGE",
              "The container image holding gpufrac, libgpufrac_memcap.so and the engines.",
              RenderOptions{}.image)
      .option("namespace", "NS", "The namespace of every namespaced object.",
              RenderOptions{}.namespace_name)
      .option("queue", "NAME", "The KAI queue the model pods go to (rendered as a Queue).",
              RenderOptions{}.queue)
      .section("Example",
               "  gpufrac k8s render node.yaml --out k8s/ --image registry.example/gpufrac:1.0\n"
               "  kubectl apply -k k8s/\n"
               "  kubectl -n gpufrac port-forward svc/demo 8000:8000");
  if (!args.parse(argc, argv)) return 0;
  if (args.positionals().size() != 1)
    throw UsageError("give one node spec file: gpufrac k8s render SPEC --out DIR");
  const std::string spec_path = args.positionals()[0];
  RenderOptions options;
  options.image = args.get("image");
  options.namespace_name = args.get("namespace");
  options.queue = args.get("queue");
  options.spec_file = std::filesystem::path(spec_path).filename().string();
  check_name("namespace", options.namespace_name);
  check_name("queue", options.queue);
  if (options.image.empty())
    throw UsageError("--image: give the image, like registry.example/gpufrac:1.0");

  NodeSpec spec = load_node_spec(spec_path);
  std::vector<Manifest> manifests = render_manifests(spec, options);
  std::filesystem::path out = args.get("out");
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) throw RuntimeFailure("--out: cannot create " + out.string() + ": " + ec.message());

  std::set<std::string> files = {"kustomization.yaml"};
  for (const Manifest& m : manifests) files.insert(m.file);
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    if (entry.is_regular_file() && !files.count(entry.path().filename().string()) &&
        written_by_render(entry.path())) {
      std::filesystem::remove(entry.path());
    }
  }
  for (const Manifest& m : manifests) write_file(out / m.file, manifest_text(m, options));
  write_file(out / "kustomization.yaml",
             manifest_text({"kustomization.yaml", kustomization(manifests)}, options));
  std::cout << "wrote " << manifests.size() + 1 << " files to " << out.string() << ":\n";
  for (const Manifest& m : manifests) std::cout << "  " << m.file << "\n";
  std::cout << "  kustomization.yaml\napply with: kubectl apply -k " << out.string() << "\n";
  return 0;
}

}  // namespace gpufrac::k8s
