// The keys of a node: the client keys that may call each model (models[].api_keys as written in
// the spec, the keys in the file api_keys_file names, the keys in the variable api_keys_env
// names; all of them together) and the node's internal key for its engines. Read when a node
// starts — `gpufrac up`, the experiment — never when a spec is parsed, so that `gpufrac k8s
// render` needs no secret. Files and variables hold keys separated by commas or whitespace,
// '#' lines being comments (common/api_key.h).
//
// Errors are one line naming the spec, the field and the fix, and never a key. Not thread-safe
// with respect to the environment (reads getenv).
#pragma once

#include <string>
#include <vector>

#include "node/node_spec.h"

namespace gpufrac {

// Every key that may call spec.models[model]; empty when the model names no keys. Throws
// UsageError when a file cannot be read, a variable is unset, or a source holds no key.
std::vector<std::string> resolve_model_keys(const NodeSpec& spec, size_t model);

// The variables api_keys_env names, once each: kept out of every engine's environment.
std::vector<std::string> key_variables(const NodeSpec& spec);

// Writes `key` and a newline to `path`, readable and writable by this user only (0600), replacing
// the file; the node's internal key goes to RUN_DIR/engine-key for its operator. Throws
// RuntimeFailure naming the path.
void write_key_file(const std::string& path, const std::string& key);

}  // namespace gpufrac
