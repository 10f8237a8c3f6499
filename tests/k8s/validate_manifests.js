// Validates rendered Kubernetes objects offline: `node validate_manifests.js PACKAGE_DIR FILE...`
// where PACKAGE_DIR is the pinned kubernetes-models package (scripts/install-deps.d/kubernetes-models)
// and each FILE is one object as JSON. Core objects are checked against the Kubernetes OpenAPI
// schemas the package carries (types, required fields, formats); KAI's Queue, a custom resource
// the package does not know, and kustomize's Kustomization are checked field by field here.
// Prints one line per object ("ok FILE" or "FAIL FILE: why") and exits 1 if any failed.
"use strict";
const path = require("path");

const [packageDir, ...files] = process.argv.slice(2);
const models = {
  "v1": require(path.join(packageDir, "v1")),
  "apps/v1": require(path.join(packageDir, "apps/v1")),
  "networking.k8s.io/v1": require(path.join(packageDir, "networking.k8s.io/v1")),
};

function fail(message) {
  throw new Error(message);
}

function checkKeys(object, where, allowed) {
  if (typeof object !== "object" || object === null || Array.isArray(object)) fail(`${where} must be an object`);
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) fail(`${where}.${key} is not a field (allowed: ${allowed.join(", ")})`);
  }
}

// scheduling.run.ai/v2 Queue: spec.parentQueue (string), spec.resources.{cpu,gpu,memory} with
// numeric quota, limit (-1: none) and overQuotaWeight.
function checkQueue(object) {
  checkKeys(object, "Queue", ["apiVersion", "kind", "metadata", "spec"]);
  if (!/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(object.metadata?.name ?? "")) fail("metadata.name is not a DNS label");
  if ("namespace" in object.metadata) fail("metadata.namespace: a Queue is cluster-scoped");
  checkKeys(object.spec, "spec", ["parentQueue", "priority", "resources"]);
  checkKeys(object.spec.resources, "spec.resources", ["cpu", "gpu", "memory"]);
  for (const [name, share] of Object.entries(object.spec.resources)) {
    checkKeys(share, `spec.resources.${name}`, ["quota", "limit", "overQuotaWeight"]);
    for (const [key, value] of Object.entries(share)) {
      if (typeof value !== "number") fail(`spec.resources.${name}.${key} must be a number`);
    }
  }
}

function checkKustomization(object) {
  checkKeys(object, "Kustomization", ["apiVersion", "kind", "resources"]);
  if (!Array.isArray(object.resources) || !object.resources.every((r) => typeof r === "string")) {
    fail("resources must be a list of file names");
  }
}

let failed = 0;
for (const file of files) {
  const object = JSON.parse(require("fs").readFileSync(file, "utf8"));
  try {
    const { apiVersion, kind } = object;
    if (apiVersion === "scheduling.run.ai/v2" && kind === "Queue") {
      checkQueue(object);
    } else if (apiVersion === "kustomize.config.k8s.io/v1beta1" && kind === "Kustomization") {
      checkKustomization(object);
    } else {
      const Model = models[apiVersion]?.[kind];
      if (!Model) fail(`no schema for ${apiVersion} ${kind}`);
      new Model(object).validate();
    }
    console.log(`ok ${file}`);
  } catch (error) {
    console.log(`FAIL ${file}: ${error.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
