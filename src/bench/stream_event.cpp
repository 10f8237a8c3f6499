#include "bench/stream_event.h"

#include "common/json.h"

namespace gpufrac {
namespace {

bool non_empty_string(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

bool choice_has_content(const Json& choice) {
  if (!choice.is_object()) return false;
  if (non_empty_string(choice, "text")) return true;  // /v1/completions
  auto delta = choice.find("delta");                  // /v1/chat/completions
  if (delta == choice.end() || !delta->is_object()) return false;
  return non_empty_string(*delta, "content") || non_empty_string(*delta, "reasoning_content") ||
         non_empty_string(*delta, "reasoning");
}

std::string error_text(const Json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object()) {
    if (non_empty_string(error, "message")) return error["message"].get<std::string>();
  }
  return error.dump();
}

}  // namespace

StreamEvent interpret_stream_message(const SseMessage& message) {
  StreamEvent event;
  if (message.data == "[DONE]") {
    event.done = true;
    return event;
  }
  Json chunk = Json::parse(message.data, nullptr, /*allow_exceptions=*/false);
  if (message.event == "error") {
    event.error = chunk.is_discarded()      ? message.data
                  : chunk.contains("error") ? error_text(chunk["error"])
                                            : error_text(chunk);
    return event;
  }
  if (chunk.is_discarded() || !chunk.is_object()) {
    event.error = "unparseable stream data: " + message.data.substr(0, 200);
    return event;
  }
  if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) {
    event.error = error_text(*it);
    return event;
  }
  if (auto it = chunk.find("object"); it != chunk.end() && *it == "error") {
    event.error = error_text(chunk);
    return event;
  }
  if (auto choices = chunk.find("choices"); choices != chunk.end() && choices->is_array()) {
    for (const Json& choice : *choices) {
      if (choice_has_content(choice)) event.content = true;
      if (!event.finish_reason && choice.is_object()) {
        if (auto reason = choice.find("finish_reason");
            reason != choice.end() && reason->is_string()) {
          event.finish_reason = reason->get<std::string>();
        }
      }
    }
  }
  if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    if (auto p = usage->find("prompt_tokens"); p != usage->end() && p->is_number_integer()) {
      event.prompt_tokens = p->get<int64_t>();
    }
    if (auto c = usage->find("completion_tokens"); c != usage->end() && c->is_number_integer()) {
      event.completion_tokens = c->get<int64_t>();
    }
  }
  return event;
}

}  // namespace gpufrac
