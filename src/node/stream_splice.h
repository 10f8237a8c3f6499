// StreamSplice: the router's view of one client's SSE stream, which may be served by several
// engine streams in turn (a stream cut by an engine's death continues on a restarted engine or
// another replica). It frames the engine's decoded body bytes into whole events, so the client
// only ever gets whole events, and says what has reached the client.
//
// With `track_tokens` (a /v1/completions stream of the built-in engine, whose chunks carry
// "token_ids"), it also reads every event's JSON: it records the token ids delivered, whether a
// chunk carried a finish_reason, and keeps back what a cut engine stream ends with instead of
// finishing the request: an error event ("generation failed", a GPU fault) or a [DONE] before any
// finish_reason (an engine cancelling its requests as it stops); both make the stream
// interrupted(). The chunks of a later engine stream (after begin_attempt()) are rewritten to
// continue the first's: each gets the first delivered chunk's "id" and "created". Its usage
// chunk needs no change: the engine counts the whole run of a resumed request (serve's
// resume_token_ids).
//
// Without `track_tokens` events pass unchanged; such a stream can be sent again only while no
// event has reached the client.
//
// Not thread-safe: one routed request uses it, from one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"

namespace gpufrac {

class StreamSplice {
 public:
  explicit StreamSplice(bool track_tokens) : track_tokens_(track_tokens) {}

  // Appends to `out` the whole events that `bytes` completes, as the client must get them.
  void feed(std::string_view bytes, std::string& out);
  // At the end of an engine stream: what is left of it (bytes of an unfinished event), which the
  // client gets when the stream ended cleanly.
  std::string take_rest();
  // The next engine stream continues this one (after a cut): forgets the partial event of the
  // last one and clears interrupted().
  void begin_attempt();

  bool track_tokens() const { return track_tokens_; }
  int64_t events_delivered() const { return events_delivered_; }
  const std::vector<int32_t>& delivered_ids() const { return delivered_ids_; }
  bool finished() const { return finished_; }  // a chunk with a finish_reason was delivered
  bool done() const { return done_; }          // data: [DONE] was delivered
  // This engine stream ended the request without finishing it (see above); its events since are
  // dropped.
  bool interrupted() const { return interrupted_; }
  // The error event that interrupted the stream, if one did (for a client that cannot be given
  // the rest after all).
  const std::string& held_error() const { return held_error_; }
  // Every token chunk carried its ids: the stream can be resumed.
  bool resumable() const { return track_tokens_ && ids_complete_; }

 private:
  void take_event(std::string_view event, std::string& out);
  // Appends the chunk's event, with the first delivered chunk's id and created.
  void continue_first_stream(Json& chunk, std::string_view event, std::string& out);

  bool track_tokens_;
  std::string partial_;  // bytes of an event not yet complete
  int64_t events_delivered_ = 0;
  std::vector<int32_t> delivered_ids_;
  bool finished_ = false;
  bool done_ = false;
  bool interrupted_ = false;
  bool ids_complete_ = true;
  std::string held_error_;
  Json first_id_;  // the first delivered chunk's "id" and "created"
  Json first_created_;
};

}  // namespace gpufrac
