#include "bench/sse_parser.h"

namespace gpufrac {

void SseParser::feed(std::string_view bytes, int64_t arrival_ns, std::vector<SseMessage>& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    // Copy the run of ordinary bytes in one go: events are mostly one long "data:" line.
    size_t end = bytes.find_first_of("\r\n", i);
    size_t stop = end == std::string_view::npos ? bytes.size() : end;
    if (stop > i) {
      if (line_.empty()) line_start_ns_ = arrival_ns;
      line_.append(bytes.data() + i, stop - i);
    }
    if (end == std::string_view::npos) break;
    after_cr_ = bytes[end] == '\r';
    end_line(out);
    i = end + 1;
  }
}

void SseParser::end_line(std::vector<SseMessage>& out) {
  if (line_.empty()) {  // blank line: dispatch
    if (in_message_ && has_data_) out.push_back(std::move(message_));
    message_ = SseMessage{};
    in_message_ = false;
    has_data_ = false;
    return;
  }
  if (line_[0] == ':') {  // comment
    line_.clear();
    return;
  }
  std::string_view line = line_;
  std::string_view field = line, value;
  if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (!in_message_) {
    in_message_ = true;
    message_.first_byte_ns = line_start_ns_;
  }
  if (field == "data") {
    if (has_data_) message_.data += '\n';
    message_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    message_.event.assign(value);
  }  // "id", "retry" and unknown fields carry nothing bench measures
  line_.clear();
}

}  // namespace gpufrac
