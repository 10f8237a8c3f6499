#include "engine/api/openai_server_sinks.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

#include "engine/api/logprobs_json.h"

namespace gpufrac::engine {

namespace {

void append_int(std::string& out, int64_t value) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

// `text` as a JSON string literal. Per token on the engine thread, so without a Json object.
// The text is whole UTF-8 characters (GeneratedText), so only quotes, backslashes and control
// characters need escaping.
void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

std::string dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// `resumed`: ids of an interrupted run at the end of the engine's prompt, counted as generated.
Json usage_json(const RequestOutcome& o, int64_t resumed) {
  return {{"prompt_tokens", o.prompt_tokens - resumed},
          {"completion_tokens", o.completion_tokens + resumed},
          {"total_tokens", o.prompt_tokens + o.completion_tokens}};
}

// The text state an interrupted run had reached: what it released was sent by that run.
void prime_text(GeneratedText& text, const std::vector<int32_t>& resumed_ids) {
  for (int32_t id : resumed_ids) text.add(id, FinishReason::kNone);
}

std::string_view finish_reason_json(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "\"stop\"";
    case FinishReason::kLength:
      return "\"length\"";
    default:
      return "null";  // only a request's last token carries a reason
  }
}

// What a sink keeps per choice.
struct ChoiceState {
  explicit ChoiceState(const SinkSetup& setup)
      : text(setup.tokenizer, setup.text), echo(setup.echo_text), content(setup.echo_text) {
    if (setup.logprobs) logprobs.emplace(setup.endpoint, setup.tokenizer);
    prime_text(text, setup.resumed_ids);
  }
  GeneratedText text;
  std::string echo;  // streamed: the echoed prompt, until the choice's first chunk takes it
  std::optional<LogprobsJson> logprobs;
  FinishReason finish = FinishReason::kNone;  // once known (kStop for a stop string)
  bool role_sent = false;                     // streamed chat: the role chunk went out
  std::vector<int32_t> tokens;                // buffered
  std::string content;                        // buffered: the echo, then the generated text
};

std::vector<ChoiceState> make_choices(const SinkSetup& setup) {
  std::vector<ChoiceState> choices;
  choices.reserve(size_t(setup.choices));
  for (int i = 0; i < setup.choices; ++i) choices.emplace_back(setup);
  return choices;
}

// Feeds `token` to its choice: the text it releases (valid until the choice's next token), its
// logprobs, and choice.finish when it ends the choice — its own finish, or a stop string, for
// which the engine is asked to stop that choice.
const std::string& advance(ChoiceState& choice, const GeneratedToken& token,
                           const SinkSetup& setup) {
  FinishReason finish = token.finish;
  const std::string& delta = choice.text.add(token.id, finish);
  if (choice.text.stopped()) {
    setup.engine->stop_request(setup.request_id + uint64_t(token.choice));
    finish = FinishReason::kStop;
  }
  if (choice.logprobs) choice.logprobs->add(token.logprobs);
  choice.finish = finish;
  return delta;
}

// Streams chunks as tokens are sampled. The stream starts with the first event (on the engine
// thread), so a refused request can still get an error status from the handler.
class StreamingSink : public RequestSink {
 public:
  explicit StreamingSink(SinkSetup setup)
      : setup_(std::move(setup)), choices_(make_choices(setup_)) {
    chunk_head_ = "data: " + dump(setup_.head);
    chunk_head_.back() = ',';  // the object stays open for "choices"
    chunk_tail_ = setup_.include_usage ? "}],\"usage\":null}\n\n" : "}]}\n\n";
  }

  void on_token(const GeneratedToken& token) override {
    ChoiceState& choice = choices_[size_t(token.choice)];
    if (gone_ || choice.finish != FinishReason::kNone) return;
    const std::string& delta = advance(choice, token, setup_);
    if (setup_.endpoint == GenerationEndpoint::kCompletions) {
      send_completion_chunk(token.choice, delta, token.id);
    } else {
      send_chat_chunk(token.choice, delta);
    }
  }

  void on_finish(const RequestOutcome& outcome) override {
    const bool all_finished =
        std::all_of(choices_.begin(), choices_.end(),
                    [](const ChoiceState& c) { return c.finish != FinishReason::kNone; });
    if (!gone_ && outcome.reason == FinishReason::kError) {
      send("data: " +
           openai_error_body("generation failed: " + outcome.error, "internal_server_error", "",
                             "500") +
           "\n\n");
    } else if (!gone_ && setup_.include_usage &&
               (all_finished || outcome.reason != FinishReason::kCancelled)) {
      send(chunk_head_ + "\"choices\":[],\"usage\":" +
           dump(usage_json(outcome, int64_t(setup_.resumed_ids.size()))) + "}\n\n");
    }
    if (!gone_) send("data: [DONE]\n\n");
    setup_.response->end();
  }

 private:
  void send_completion_chunk(int index, const std::string& delta, int32_t token) {
    ChoiceState& choice = choices_[size_t(index)];
    const std::string echoed =
        choice.echo.empty() ? std::string() : std::exchange(choice.echo, {}) + delta;
    const std::string& text = echoed.empty() ? delta : echoed;
    send_chunk(
        index,
        [&](std::string& out) {
          out += "\"text\":";
          append_json_string(out, text);
          out += ",\"token_ids\":[";
          append_int(out, token);
          out += ']';
        },
        true);
  }

  void send_chat_chunk(int index, const std::string& delta) {
    ChoiceState& choice = choices_[size_t(index)];
    if (!choice.role_sent) {
      choice.role_sent = true;
      send_chunk(
          index,
          [](std::string& out) { out += "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"; },
          false);
    }
    if (delta.empty() && choice.finish == FinishReason::kNone) return;
    send_chunk(
        index,
        [&](std::string& out) {
          out += "\"delta\":{";
          if (!delta.empty()) {
            out += "\"content\":";
            append_json_string(out, delta);
          }
          out += '}';
        },
        true);
  }

  // One chunk: the head, then choices[0] = {"index", BODY, "logprobs", "finish_reason"}, then the
  // tail. `append_body` appends the layout's fields of the choice (no separators around them) to
  // the buffer it is given: chunk_, reused for every token, so a chunk allocates nothing once the
  // buffer has grown to a chunk's size. With `content` the chunk carries the choice's
  // finish_reason once known and its logprobs since the last chunk that carried some (chat sends
  // no chunk for a token without text); without (the role chunk) both are null.
  template <typename AppendBody>
  void send_chunk(int index, const AppendBody& append_body, bool content) {
    ChoiceState& choice = choices_[size_t(index)];
    chunk_ = chunk_head_;
    chunk_ += "\"choices\":[{\"index\":";
    append_int(chunk_, index);
    chunk_ += ',';
    append_body(chunk_);
    chunk_ += ",\"logprobs\":";
    chunk_ += content && choice.logprobs && !choice.logprobs->empty()
                  ? dump(choice.logprobs->take())
                  : "null";
    chunk_ += ",\"finish_reason\":";
    chunk_ += finish_reason_json(content ? choice.finish : FinishReason::kNone);
    chunk_ += chunk_tail_;
    send(chunk_);
  }

  void send(std::string_view data) {
    if (gone_) return;
    if (!started_) {
      setup_.response->start_stream(200, "text/event-stream");
      started_ = true;
    }
    if (!setup_.response->write(data)) {
      gone_ = true;  // on_disconnect cancels too; this covers a write that lost the race
      setup_.engine->cancel(setup_.request_id);
    }
  }

  SinkSetup setup_;
  std::vector<ChoiceState> choices_;
  std::string chunk_head_;  // `data: {"id":..,"object":..,"created":..,"model":..,`
  std::string chunk_tail_;  // closes choices[0] and the chunk
  bool started_ = false;
  bool gone_ = false;
  std::string chunk_;  // reused for every token
};

// Collects the tokens and answers once with the whole completion.
class BufferedSink : public RequestSink {
 public:
  explicit BufferedSink(SinkSetup setup)
      : setup_(std::move(setup)), choices_(make_choices(setup_)) {}

  void on_token(const GeneratedToken& token) override {
    ChoiceState& choice = choices_[size_t(token.choice)];
    if (choice.finish != FinishReason::kNone) return;
    choice.tokens.push_back(token.id);
    choice.content += advance(choice, token, setup_);
  }

  void on_finish(const RequestOutcome& outcome) override {
    HttpResponse& response = *setup_.response;
    if (outcome.reason == FinishReason::kError) {
      send_openai_error(response, 500, "generation failed: " + outcome.error);
      return;
    }
    // The client left, or the server stops (a request whose every choice ended is complete).
    const bool all_finished =
        std::all_of(choices_.begin(), choices_.end(),
                    [](const ChoiceState& c) { return c.finish != FinishReason::kNone; });
    if (outcome.reason == FinishReason::kCancelled && !all_finished) {
      send_openai_error(response, 503, "the request was cancelled: the server is stopping");
      return;
    }
    Json list = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      ChoiceState& c = choices_[i];
      Json choice = {{"index", i}};
      if (setup_.endpoint == GenerationEndpoint::kCompletions) {
        choice["text"] = std::move(c.content);
        choice["token_ids"] = c.tokens;
      } else {
        choice["message"] = {{"role", "assistant"}, {"content", std::move(c.content)}};
      }
      choice["logprobs"] = c.logprobs ? c.logprobs->take() : Json();
      choice["finish_reason"] = finish_reason_name(c.finish);
      list.push_back(std::move(choice));
    }
    Json body = std::move(setup_.head);
    body["choices"] = std::move(list);
    body["usage"] = usage_json(outcome, int64_t(setup_.resumed_ids.size()));
    response.send(200, "application/json", dump(body));
  }

 private:
  SinkSetup setup_;
  std::vector<ChoiceState> choices_;
};

}  // namespace

std::shared_ptr<RequestSink> make_streaming_sink(SinkSetup setup) {
  return std::make_shared<StreamingSink>(std::move(setup));
}

std::shared_ptr<RequestSink> make_buffered_sink(SinkSetup setup) {
  return std::make_shared<BufferedSink>(std::move(setup));
}

}  // namespace gpufrac::engine
