// `gpufrac k8s render SPEC --out DIR`: writes the kustomize base of manifests.h into DIR (created
// when missing): kustomization.yaml and one file per object. Files a previous render wrote there
// (they start with kRenderedHeader) and that this one does not are removed; nothing else in DIR
// is touched. Prints the files written and what to run next.
#pragma once

namespace gpufrac::k8s {

int render_command(int argc, char** argv);

}  // namespace gpufrac::k8s
