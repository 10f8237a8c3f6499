// Incremental parser for a text/event-stream body (the WHATWG "server-sent events" format), for
// bench's client. Feed decoded body bytes as they arrive, each batch with the CLOCK_MONOTONIC time
// at which it was read; complete messages come out stamped with the arrival time of their first
// byte, so a message split over several reads keeps the time it started to arrive, and several
// messages in one read share that read's time.
//
// Lines end in LF, CRLF or CR (a CR at the end of one batch and an LF at the start of the next are
// one line end). Comment lines (":" first) never start a message and are dropped; "data" lines are
// joined with "\n"; a blank line ends a message; a message without data lines is not dispatched
// (as browsers do). Not thread-safe; one parser per response.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpufrac {

struct SseMessage {
  std::string event;  // the "event:" field, "" when absent (the default "message")
  std::string data;   // data lines joined with "\n"
  int64_t first_byte_ns = 0;
};

class SseParser {
 public:
  // Appends every message completed by `bytes` to `out`. `arrival_ns` is when `bytes` were read.
  void feed(std::string_view bytes, int64_t arrival_ns, std::vector<SseMessage>& out);
  // Bytes of an unfinished message are pending (a stream that ends here was cut short).
  bool mid_message() const { return !line_.empty() || in_message_; }

 private:
  void end_line(std::vector<SseMessage>& out);

  std::string line_;           // the current, unfinished line
  int64_t line_start_ns_ = 0;  // arrival of the current line's first byte
  bool after_cr_ = false;      // the previous byte was a CR: an LF now belongs to that line end
  bool in_message_ = false;    // a field line of the current message has been seen
  bool has_data_ = false;
  SseMessage message_;
};

}  // namespace gpufrac
