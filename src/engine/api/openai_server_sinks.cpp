#include "engine/api/openai_server_sinks.h"

#include <charconv>
#include <optional>
#include <string_view>

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

Json usage_json(const RequestOutcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"total_tokens", o.prompt_tokens + o.completion_tokens}};
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

// Streams chunks as tokens are sampled. The stream starts with the first event (on the engine
// thread), so a refused request can still get an error status from the handler.
class StreamingSink : public RequestSink {
 public:
  explicit StreamingSink(SinkSetup setup)
      : setup_(std::move(setup)), text_(setup_.tokenizer, std::move(setup_.text)) {
    chunk_head_ = "data: " + dump(setup_.head);
    chunk_head_.back() = ',';  // the object stays open for "choices"
    chunk_tail_ = setup_.include_usage ? "}],\"usage\":null}\n\n" : "}]}\n\n";
    if (setup_.logprobs) logprobs_.emplace(setup_.endpoint, setup_.tokenizer);
  }

  void on_token(const GeneratedToken& token) override {
    if (gone_ || finish_sent_) return;
    FinishReason finish = token.finish;
    const std::string& delta = text_.add(token.id, finish);
    if (text_.stopped()) {
      setup_.engine->stop_request(setup_.request_id);
      finish = FinishReason::kStop;
    }
    if (logprobs_) logprobs_->add(token.logprobs);
    if (setup_.endpoint == GenerationEndpoint::kCompletions) {
      send_completion_chunk(delta, token.id, finish);
    } else {
      send_chat_chunk(delta, finish);
    }
    finish_sent_ = finish != FinishReason::kNone;
  }

  void on_finish(const RequestOutcome& outcome) override {
    if (!gone_ && outcome.reason == FinishReason::kError) {
      send("data: " +
           openai_error_body("generation failed: " + outcome.error, "internal_server_error", "",
                             "500") +
           "\n\n");
    } else if (!gone_ && setup_.include_usage &&
               (finish_sent_ || outcome.reason != FinishReason::kCancelled)) {
      send(chunk_head_ + "\"choices\":[],\"usage\":" + dump(usage_json(outcome)) + "}\n\n");
    }
    if (!gone_) send("data: [DONE]\n\n");
    setup_.response->end();
  }

 private:
  void send_completion_chunk(const std::string& delta, int32_t token, FinishReason finish) {
    send_chunk(
        [&](std::string& out) {
          out += "\"text\":";
          append_json_string(out, delta);
          out += ",\"token_ids\":[";
          append_int(out, token);
          out += ']';
        },
        finish);
  }

  void send_chat_chunk(const std::string& delta, FinishReason finish) {
    if (!role_sent_) {
      role_sent_ = true;
      send_chunk(
          [](std::string& out) { out += "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"; },
          FinishReason::kNone, false);
    }
    if (delta.empty() && finish == FinishReason::kNone) return;
    send_chunk(
        [&](std::string& out) {
          out += "\"delta\":{";
          if (!delta.empty()) {
            out += "\"content\":";
            append_json_string(out, delta);
          }
          out += '}';
        },
        finish);
  }

  // One chunk: the head, then choices[0] = {"index":0, BODY, "logprobs", "finish_reason"},
  // then the tail. `append_body` appends the layout's fields of the choice (no separators around
  // them) to the buffer it is given: chunk_, reused for every token, so a chunk allocates nothing
  // once the buffer has grown to a chunk's size. "logprobs" is null, or those of the tokens
  // since the last chunk that carried some (chat sends no chunk for a token without text).
  template <typename AppendBody>
  void send_chunk(const AppendBody& append_body, FinishReason finish, bool with_logprobs = true) {
    chunk_ = chunk_head_;
    chunk_ += "\"choices\":[{\"index\":0,";
    append_body(chunk_);
    chunk_ += ",\"logprobs\":";
    chunk_ += with_logprobs && logprobs_ && !logprobs_->empty() ? dump(logprobs_->take()) : "null";
    chunk_ += ",\"finish_reason\":";
    chunk_ += finish_reason_json(finish);
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
  GeneratedText text_;
  std::optional<LogprobsJson> logprobs_;  // when the request asked for logprobs
  std::string chunk_head_;  // `data: {"id":..,"object":..,"created":..,"model":..,`
  std::string chunk_tail_;  // closes choices[0] and the chunk
  bool started_ = false;
  bool gone_ = false;
  bool role_sent_ = false;
  bool finish_sent_ = false;  // a chunk carried finish_reason: nothing more but usage and [DONE]
  std::string chunk_;         // reused for every token
};

// Collects the tokens and answers once with the whole completion.
class BufferedSink : public RequestSink {
 public:
  explicit BufferedSink(SinkSetup setup)
      : setup_(std::move(setup)), text_(setup_.tokenizer, std::move(setup_.text)) {
    if (setup_.logprobs) logprobs_.emplace(setup_.endpoint, setup_.tokenizer);
  }

  void on_token(const GeneratedToken& token) override {
    if (text_.stopped()) return;
    tokens_.push_back(token.id);
    content_ += text_.add(token.id, token.finish);
    if (logprobs_) logprobs_->add(token.logprobs);
    if (text_.stopped()) setup_.engine->stop_request(setup_.request_id);
  }

  void on_finish(const RequestOutcome& outcome) override {
    HttpResponse& response = *setup_.response;
    if (outcome.reason == FinishReason::kError) {
      send_openai_error(response, 500, "generation failed: " + outcome.error);
      return;
    }
    // The client left, or the server stops (a request that met its stop string is complete).
    if (outcome.reason == FinishReason::kCancelled && !text_.stopped()) {
      send_openai_error(response, 503, "the request was cancelled: the server is stopping");
      return;
    }
    std::string_view reason =
        finish_reason_name(text_.stopped() ? FinishReason::kStop : outcome.reason);
    Json choice = {{"index", 0}};
    if (setup_.endpoint == GenerationEndpoint::kCompletions) {
      choice["text"] = std::move(content_);
      choice["token_ids"] = tokens_;
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", std::move(content_)}};
    }
    choice["logprobs"] = logprobs_ ? logprobs_->take() : Json();
    choice["finish_reason"] = reason;
    Json body = std::move(setup_.head);
    body["choices"] = Json::array({std::move(choice)});
    body["usage"] = usage_json(outcome);
    response.send(200, "application/json", dump(body));
  }

 private:
  SinkSetup setup_;
  GeneratedText text_;
  std::optional<LogprobsJson> logprobs_;
  std::vector<int32_t> tokens_;
  std::string content_;
};

}  // namespace

std::shared_ptr<RequestSink> make_streaming_sink(SinkSetup setup) {
  return std::make_shared<StreamingSink>(std::move(setup));
}

std::shared_ptr<RequestSink> make_buffered_sink(SinkSetup setup) {
  return std::make_shared<BufferedSink>(std::move(setup));
}

}  // namespace gpufrac::engine
