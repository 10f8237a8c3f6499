// Drives a running `gpufrac serve` with the official OpenAI JavaScript client (npm `openai`,
// installed by scripts/install-deps.d/openai-client) and checks the objects it parses: a streamed
// and a non-streamed chat completion, a streamed and a non-streamed text completion (with a stop
// string), the sampling fields (n, logprobs in both layouts, seed alone and in a batch, top_k,
// top_p, min_p, the penalties, logit_bias, stop_token_ids, echo, max_completion_tokens, and the
// 400 of what is still unsupported), the model list, and the client's error classes for a 404 and
// a 400. With API_KEY (the server's --api-key) every call carries it as the client's apiKey, and a
// client with another key gets AuthenticationError (401). Exits non-zero
// (an AssertionError with the failing field) on any difference. Run by openai_client_test.cpp:
//
//   node openai_client_test.js OPENAI_PACKAGE_DIR BASE_URL MODEL [API_KEY]
"use strict";
const assert = require("node:assert/strict");
const path = require("node:path");

const [packageDir, baseURL, model, apiKey] = process.argv.slice(2);
if (!model) {
  console.error("usage: node openai_client_test.js OPENAI_PACKAGE_DIR BASE_URL MODEL [API_KEY]");
  process.exit(2);
}
const openai = require(path.resolve(packageDir));
const OpenAI = openai.OpenAI || openai.default || openai;
const clientOptions = { baseURL: `${baseURL}/v1`, maxRetries: 0, timeout: 60000 };
const client = new OpenAI({ ...clientOptions, apiKey: apiKey || "unused" });
// The headers of the plain fetch() calls to vLLM's /tokenize and /detokenize.
const jsonHeaders = { "Content-Type": "application/json" };
if (apiKey) jsonHeaders.Authorization = `Bearer ${apiKey}`;

function assertUsage(usage, promptTokens, what) {
  assert.ok(usage, `${what}: usage`);
  assert.equal(usage.prompt_tokens, promptTokens, `${what}: usage.prompt_tokens`);
  assert.ok(Number.isInteger(usage.completion_tokens) && usage.completion_tokens >= 1, `${what}: completion_tokens`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, `${what}: total_tokens`);
}

async function countTokens(body) {
  const reply = await fetch(`${baseURL}/tokenize`, {
    method: "POST",
    headers: jsonHeaders,
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

async function detokenize(tokens) {
  const reply = await fetch(`${baseURL}/detokenize`, {
    method: 'POST',
    headers: jsonHeaders,
    body: JSON.stringify({model, tokens}),
  });
  assert.equal(reply.status, 200, '/detokenize status');
  return (await reply.json()).prompt;
}

// vLLM's and OpenAI's sampling fields: n, logprobs (both layouts), seed, top_k/top_p/min_p, the
// penalties, logit_bias, stop_token_ids, echo, max_completion_tokens.
async function samplingFields() {
  const prompt = 'The quick brown fox';
  const base = {model, prompt, max_tokens: 8, temperature: 1, ignore_eos: true};

  // n: 3 choices, in order, streamed under their index; usage sums them.
  const three = await client.completions.create({...base, n: 3, seed: 3});
  assert.equal(three.choices.length, 3, 'n: 3 choices');
  three.choices.forEach((c, i) => assert.equal(c.index, i, 'choice index'));
  assert.equal(three.usage.completion_tokens, 24, 'usage sums the choices');
  const streamedThree = ['', '', ''];
  for await (
      const chunk of await client.completions.create({...base, n: 3, seed: 3, stream: true})) {
    for (const c of chunk.choices) streamedThree[c.index] += c.text;
  }
  assert.deepEqual(streamedThree, three.choices.map((c) => c.text), 'n: streamed by index');

  // seed: the same text twice at temperature 1, alone or in one batch with other requests.
  const seeded = {...base, seed: 7};
  const first = await client.completions.create(seeded);
  const again = await client.completions.create(seeded);
  assert.equal(again.choices[0].text, first.choices[0].text, 'seed 7: the same text');
  const batch = await Promise.all([
    client.completions.create(seeded),
    client.completions.create({...base, seed: 8}),
    client.completions.create(seeded),
  ]);
  assert.equal(batch[0].choices[0].text, first.choices[0].text, 'seed 7 in a batch');
  assert.equal(batch[2].choices[0].text, first.choices[0].text, 'seed 7 in a batch');

  // Completions logprobs: 2 top logprobs per token (and the sampled one: OpenAI's "up to k + 1").
  const withLogprobs = await client.completions.create({...seeded, logprobs: 2});
  assert.equal(withLogprobs.choices[0].text, first.choices[0].text, 'logprobs change no token');
  const lp = withLogprobs.choices[0].logprobs;
  assert.equal(lp.tokens.length, 8, 'a logprob per token');
  assert.equal(lp.token_logprobs.length, 8);
  assert.equal(lp.text_offset.length, 8);
  assert.equal(lp.tokens.join(''), first.choices[0].text, 'the tokens spell the text');
  lp.top_logprobs.forEach((top, i) => {
    const entries = Object.entries(top);
    assert.ok(
        entries.length === 2 || entries.length === 3, `top_logprobs[${i}]: ${entries.length}`);
    assert.equal(top[lp.tokens[i]], lp.token_logprobs[i], 'the sampled token is listed');
    for (const [, value] of entries) assert.ok(value <= 0, 'a log-probability');
    if (i > 0) assert.ok(lp.text_offset[i] > lp.text_offset[i - 1], 'offsets grow');
  });

  // Chat logprobs + top_logprobs: 2, OpenAI's content layout.
  const chatLogprobs = await client.chat.completions.create({
    model,
    messages: [{role: 'user', content: 'Count to three.'}],
    max_tokens: 6,
    seed: 5,
    logprobs: true,
    top_logprobs: 2,
    ignore_eos: true,
  });
  const content = chatLogprobs.choices[0].logprobs.content;
  assert.equal(content.length, 6, 'a content entry per token');
  for (const entry of content) {
    assert.equal(typeof entry.token, 'string');
    assert.ok(entry.logprob <= 0);
    assert.ok(Array.isArray(entry.bytes) && entry.bytes.every((b) => Number.isInteger(b)));
    assert.equal(entry.top_logprobs.length, 2, 'top_logprobs: 2');
    assert.ok(entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob, 'likeliest first');
    assert.ok(entry.top_logprobs[0].logprob >= entry.logprob, 'nothing beats the top one');
  }

  // Every sampling field at once is accepted; a +100 logit_bias then wins every draw.
  const hello = 9707;
  const helloText = await detokenize([hello]);
  const everything = await client.completions.create({
    ...base,
    max_tokens: 16,
    max_completion_tokens: 4,
    seed: 1,
    top_k: 50,
    top_p: 0.95,
    min_p: 0.01,
    presence_penalty: 0.5,
    frequency_penalty: 0.3,
    repetition_penalty: 1.1,
    logit_bias: {[hello]: 100},
    echo: true,
  });
  assert.equal(everything.usage.completion_tokens, 4, 'max_completion_tokens before max_tokens');
  assert.equal(
      everything.choices[0].text, prompt + helloText.repeat(4), 'echo, then the biased id');

  // stop_token_ids: the biased id is also a stop id, so the first token ends the choice.
  const stopped = await client.completions.create({
    ...base,
    logit_bias: {[hello]: 100},
    stop_token_ids: [hello],
    ignore_eos: false,
  });
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  assert.equal(stopped.usage.completion_tokens, 1);
  assert.equal(stopped.choices[0].text, '', 'a stop id adds no text');

  // Still unsupported: a clear 400 naming the field.
  await assert.rejects(
      client.chat.completions.create({
        model,
        messages: [{role: 'user', content: 'x'}],
        tools: [{type: 'function', function: {name: 'f', parameters: {}}}],
      }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools',
  );
  await assert.rejects(
      client.chat.completions.create({
        model,
        messages: [{role: 'user', content: 'x'}],
        response_format: {type: 'json_object'},
      }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format',
  );
  return three.choices.length;
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

// The server's --api-key: another key is refused with the client's AuthenticationError, and so is
// a plain request without one.
async function apiKeyRefusals() {
  const stranger = new OpenAI({ ...clientOptions, apiKey: `not-${apiKey}` });
  await assert.rejects(stranger.models.list(),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(
    stranger.completions.create({ model, prompt: [1, 2, 3], max_tokens: 2 }),
    (e) => e instanceof OpenAI.AuthenticationError && e.code === "invalid_api_key",
  );
  const bare = await fetch(`${baseURL}/v1/models`);
  assert.equal(bare.status, 401, "/v1/models without a key");
  assert.equal((await fetch(`${baseURL}/health`)).status, 200, "/health without a key");
}

(async () => {
  if (apiKey) await apiKeyRefusals();
  const chatText = await chat();
  const completionText = await completion();
  await samplingFields();
  await modelsAndErrors();
  console.log(JSON.stringify({ chat: chatText, completion: completionText }));
  console.log("openai client: all checks passed");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
