#include "node/stream_splice.h"

namespace gpufrac {
namespace {

// Where the event that starts `text` ends (past its blank line), or npos while it is incomplete.
size_t event_end(std::string_view text) {
  size_t lf = text.find("\n\n");
  size_t crlf = text.find("\r\n\r\n");
  if (lf == std::string_view::npos && crlf == std::string_view::npos) return std::string_view::npos;
  if (crlf == std::string_view::npos || (lf != std::string_view::npos && lf < crlf)) return lf + 2;
  return crlf + 4;
}

// The event's data (its "data:" lines joined by newlines); `has_data` says whether it had any.
std::string event_data(std::string_view event, bool& has_data) {
  std::string data;
  has_data = false;
  while (!event.empty()) {
    size_t end = event.find('\n');
    std::string_view line = event.substr(0, end);
    event = end == std::string_view::npos ? std::string_view() : event.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.starts_with("data:")) continue;
    line.remove_prefix(5);
    if (line.starts_with(' ')) line.remove_prefix(1);
    if (has_data) data += '\n';
    data += line;
    has_data = true;
  }
  return data;
}

}  // namespace

void StreamSplice::feed(std::string_view bytes, std::string& out) {
  partial_.append(bytes);
  size_t used = 0;
  while (true) {
    size_t end = event_end(std::string_view(partial_).substr(used));
    if (end == std::string_view::npos) break;
    take_event(std::string_view(partial_).substr(used, end), out);
    used += end;
  }
  partial_.erase(0, used);
}

std::string StreamSplice::take_rest() {
  std::string rest = interrupted_ ? std::string() : std::move(partial_);
  partial_.clear();
  return rest;
}

void StreamSplice::begin_attempt() {
  partial_.clear();
  interrupted_ = false;
  held_error_.clear();
}

void StreamSplice::take_event(std::string_view event, std::string& out) {
  if (interrupted_) return;
  bool has_data = false;
  std::string data = event_data(event, has_data);
  if (!has_data) {  // a comment (keep-alive): passes, but the client has seen no data
    out.append(event);
    return;
  }
  if (data == "[DONE]") {
    if (track_tokens_ && !finished_) {
      interrupted_ = true;  // the engine ended the stream without finishing the request
      return;
    }
    done_ = true;
  } else if (track_tokens_) {
    Json chunk = Json::parse(data, nullptr, false);
    if (chunk.is_object()) {
      if (chunk.contains("error")) {
        interrupted_ = true;
        held_error_ = std::string(event);
        return;
      }
      const Json* choices = chunk.contains("choices") ? &chunk["choices"] : nullptr;
      if (choices && choices->is_array() && !choices->empty() && (*choices)[0].is_object()) {
        const Json& choice = (*choices)[0];
        auto ids = choice.find("token_ids");
        if (ids != choice.end() && ids->is_array()) {
          for (const Json& id : *ids) {
            if (id.is_number_integer()) delivered_ids_.push_back(id.get<int32_t>());
          }
        } else {
          ids_complete_ = false;
        }
        auto reason = choice.find("finish_reason");
        if (reason != choice.end() && reason->is_string()) finished_ = true;
      }
      ++events_delivered_;
      continue_first_stream(chunk, event, out);
      return;
    }
  }
  ++events_delivered_;
  out.append(event);
}

void StreamSplice::continue_first_stream(Json& chunk, std::string_view event, std::string& out) {
  if (first_id_.is_null() && chunk.contains("id")) {
    first_id_ = chunk["id"];
    first_created_ = chunk.value("created", Json());
  }
  if (!chunk.contains("id") || chunk["id"] == first_id_) {
    out.append(event);
    return;
  }
  chunk["id"] = first_id_;
  if (!first_created_.is_null()) chunk["created"] = first_created_;
  out += "data: " + chunk.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

}  // namespace gpufrac
