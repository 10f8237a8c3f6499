// Incremental HTTP/1.1 message parser, for both directions: the server parses requests, clients
// (bench, the node's router, health checks) parse responses. Feed it bytes as they arrive, in any
// split; it reports the head once complete and hands out body bytes as they are decoded
// (Content-Length, chunked transfer encoding, or until close for responses without either).
//
// Not thread-safe; one parser per connection. Limits on head and body size turn into errors
// (kHeadTooLarge / kBodyTooLarge) so a server can answer 431/413 instead of buffering forever.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufrac {

struct HttpHead {
  // Requests: method, target ("/v1/completions?x=1"), path ("/v1/completions").
  std::string method;
  std::string target;
  std::string path;
  // Responses: status code and reason.
  int status = 0;
  std::string reason;
  int version_minor = 1;  // HTTP/1.x
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased

  // The first header of that name (lower-case), or "".
  std::string_view header(std::string_view lower_name) const;
  bool keep_alive() const;  // HTTP/1.1 default unless "Connection: close"
};

class HttpParser {
 public:
  enum class Kind { kRequest, kResponse };
  enum class State {
    kHead,          // waiting for the rest of the start line and headers
    kBody,          // head complete; body bytes may follow
    kDone,          // message complete (call reset() for the next one on a keep-alive connection)
    kError,
  };
  enum class Error { kNone, kMalformed, kHeadTooLarge, kBodyTooLarge, kUnsupported };

  explicit HttpParser(Kind kind, size_t max_head_bytes = 64 * 1024,
                      uint64_t max_body_bytes = uint64_t(1) << 40);

  // Consumes bytes from `data`, appending decoded body bytes to `body_out`. Returns how many
  // bytes were consumed: fewer than data.size() only when a message ended (kDone) and the rest
  // belongs to the next message (pipelining), or on error.
  size_t feed(std::string_view data, std::string& body_out);
  // A response whose body runs until the connection closes: call on EOF to complete it.
  // Returns false if the message was cut short (an error for any other framing).
  bool finish_on_eof();
  void reset();  // ready for the next message

  State state() const { return state_; }
  Error error() const { return error_; }
  std::string_view error_text() const;
  const HttpHead& head() const { return head_; }
  bool head_complete() const { return state_ == State::kBody || state_ == State::kDone; }

  // A response to HEAD, or 1xx/204/304, has no body: tell the parser before feeding it.
  void expect_no_body() { no_body_ = true; }

 private:
  size_t parse_head(std::string_view data);
  bool parse_start_line(std::string_view line);
  bool start_body();
  size_t parse_chunked(std::string_view data, std::string& body_out);
  void fail(Error error);

  Kind kind_;
  size_t max_head_bytes_;
  uint64_t max_body_bytes_;
  State state_ = State::kHead;
  Error error_ = Error::kNone;
  HttpHead head_;
  std::string head_buffer_;
  bool no_body_ = false;
  enum class Framing { kLength, kChunked, kUntilClose } framing_ = Framing::kLength;
  uint64_t remaining_ = 0;      // kLength: body bytes left; kChunked: bytes left in this chunk
  uint64_t body_received_ = 0;
  enum class ChunkState { kSize, kData, kDataEnd, kTrailer } chunk_state_ = ChunkState::kSize;
  std::string chunk_line_;
};

// "Status reason" text for a code (200 -> "OK").
std::string_view http_reason(int status);

}  // namespace gpufrac
