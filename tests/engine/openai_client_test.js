// Drives a running `gpufrac serve` with the official OpenAI JavaScript client (npm `openai`,
// installed by scripts/install-deps.d/openai-client) and checks the objects it parses: a streamed
// and a non-streamed chat completion, a streamed and a non-streamed text completion (with a stop
// string), the model list, and the client's error classes for a 404 and a 400. Exits non-zero
// (an AssertionError with the failing field) on any difference. Run by openai_client_test.cpp:
//
//   node openai_client_test.js OPENAI_PACKAGE_DIR BASE_URL MODEL
"use strict";
const assert = require("node:assert/strict");
const path = require("node:path");

const [packageDir, baseURL, model] = process.argv.slice(2);
if (!model) {
  console.error("usage: node openai_client_test.js OPENAI_PACKAGE_DIR BASE_URL MODEL");
  process.exit(2);
}
const openai = require(path.resolve(packageDir));
const OpenAI = openai.OpenAI || openai.default || openai;
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000 });

function assertUsage(usage, promptTokens, what) {
  assert.ok(usage, `${what}: usage`);
  assert.equal(usage.prompt_tokens, promptTokens, `${what}: usage.prompt_tokens`);
  assert.ok(Number.isInteger(usage.completion_tokens) && usage.completion_tokens >= 1, `${what}: completion_tokens`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, `${what}: total_tokens`);
}

async function countTokens(body) {
  const reply = await fetch(`${baseURL}/tokenize`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model, ...body }),
  });
  assert.equal(reply.status, 200, "/tokenize status");
  const parsed = await reply.json();
  assert.equal(parsed.count, parsed.tokens.length);
  return parsed.count;
}

async function chat() {
  const messages = [
    { role: "system", content: "You are terse." },
    { role: "user", content: [{ type: "text", text: "Say hello" }, { type: "text", text: "in French." }] },
  ];
  const promptTokens = await countTokens({ messages });
  const request = { model, messages, max_tokens: 12, temperature: 0, seed: 1 };

  const stream = await client.chat.completions.create({
    ...request, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.ok(chunks.length >= 3, `chat stream: ${chunks.length} chunks`);
  const id = chunks[0].id;
  assert.match(id, /^chatcmpl-/);
  for (const chunk of chunks) {
    assert.equal(chunk.id, id, "one id for the whole stream");
    assert.equal(chunk.object, "chat.completion.chunk");
    assert.equal(chunk.model, model);
    assert.ok(Number.isInteger(chunk.created));
  }
  assert.equal(chunks[0].choices[0].delta.role, "assistant", "first chunk: the role");
  const usageChunk = chunks[chunks.length - 1];
  assert.deepEqual(usageChunk.choices, [], "last chunk: no choices");
  assertUsage(usageChunk.usage, promptTokens, "chat stream");
  const finishing = chunks.filter((c) => c.choices.length && c.choices[0].finish_reason !== null);
  assert.equal(finishing.length, 1, "exactly one chunk carries finish_reason");
  assert.equal(finishing[0], chunks[chunks.length - 2], "finish_reason comes just before usage");
  const reason = finishing[0].choices[0].finish_reason;
  assert.ok(reason === "length" || reason === "stop", `finish_reason ${reason}`);
  if (reason === "length") assert.equal(usageChunk.usage.completion_tokens, 12);
  let content = "";
  for (const chunk of chunks.slice(1, -1)) {
    const delta = chunk.choices[0].delta;
    assert.equal(delta.role, undefined, "only the first chunk names the role");
    if (delta.content !== undefined) {
      assert.equal(typeof delta.content, "string");
      content += delta.content;
    }
  }

  const whole = await client.chat.completions.create(request);
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.object, "chat.completion");
  assert.equal(whole.model, model);
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].index, 0);
  assert.equal(whole.choices[0].message.role, "assistant");
  assert.equal(whole.choices[0].message.content, content, "greedy: the same text streamed or not");
  assert.equal(whole.choices[0].finish_reason, reason);
  assert.deepEqual(whole.usage, usageChunk.usage);
  return content;
}

async function completion() {
  const prompt = "Once upon a time, in a land far away,";
  const promptTokens = await countTokens({ prompt });
  // Seeded sampling: varied text (greedy on random weights repeats one token), the same every time.
  const request = { model, prompt, max_tokens: 16, temperature: 1, seed: 7, ignore_eos: true };

  const stream = await client.completions.create({
    ...request, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  assert.equal(chunks.length, 16 + 1, "one chunk per token, then usage");
  let text = "";
  for (const [i, chunk] of chunks.slice(0, -1).entries()) {
    assert.match(chunk.id, /^cmpl-/);
    assert.equal(chunk.object, "text_completion");
    assert.equal(chunk.model, model);
    assert.equal(typeof chunk.choices[0].text, "string");
    assert.equal(chunk.choices[0].finish_reason, i === 15 ? "length" : null);
    text += chunk.choices[0].text;
  }
  assertUsage(chunks[16].usage, promptTokens, "completion stream");
  assert.equal(chunks[16].usage.completion_tokens, 16);
  assert.ok(text.length > 0, "some text");

  const whole = await client.completions.create(request);
  assert.equal(whole.object, "text_completion");
  assert.equal(whole.choices[0].text, text, "seeded: the same text streamed or not");
  assert.equal(whole.choices[0].finish_reason, "length");
  assertUsage(whole.usage, promptTokens, "completion");

  // A stop string taken from the middle of that text ends the completion before it.
  const chars = Array.from(text);
  const stop = chars.slice(Math.floor(chars.length / 2), Math.floor(chars.length / 2) + 2).join("");
  const stopped = await client.completions.create({ ...request, stop: [stop] });
  assert.equal(stopped.choices[0].text, text.slice(0, text.indexOf(stop)), `stop ${JSON.stringify(stop)}`);
  assert.equal(stopped.choices[0].finish_reason, "stop");
  assert.ok(stopped.usage.completion_tokens < 16, "stopped early");
  return text;
}

async function modelsAndErrors() {
  const models = await client.models.list();
  assert.equal(models.data[0].id, model);

  await assert.rejects(
    client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /does not exist/.test(e.message),
  );
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: "wizard", content: "x" }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /role/.test(e.message),
  );
}

(async () => {
  const chatText = await chat();
  const completionText = await completion();
  await modelsAndErrors();
  console.log(JSON.stringify({ chat: chatText, completion: completionText }));
  console.log("openai client: all checks passed");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
