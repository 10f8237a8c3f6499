// RoutedRequest: one client request to one model, from the moment the router accepts it to its
// last byte, across every engine it is sent to. It is the ProxyReplyHandler of each attempt and
// decides what the client sees of the engine's reply:
//   - a non-streamed reply is passed on once complete (so the client sees nothing of an attempt
//     that fails); a stream is passed on event by event (StreamSplice), its head with its first
//     event.
//   - The engine died (refused the connection, cut the reply, could not take the request), or it
//     answered 503 (it is stopping), or — a resumable stream — ended the stream with an error
//     event or an early [DONE] (a GPU fault, a stopping engine):
//       * nothing of the reply reached the client yet: the request is sent again as it was (retry);
//       * a resumable stream (the built-in engine's /v1/completions, every chunk with its token
//         ids): it is sent again with the ids delivered so far as "resume_token_ids" (serve's
//         field: the engine answers with the rest of the same run, greedy and seeded alike), and
//         the new stream is spliced after the last delivered token, so the client sees one stream
//         with one id, the right usage and finish_reason;
//       * otherwise the client's stream is cut, as the engine's was.
//     A request reaches engines at most 1 + kMaxResends times (a request that kills every engine
//     it reaches must not take the node down in a loop); refused connects do not count.
// Where the next attempt goes (now, after a wait, or nowhere) is the router's: it learns how each
// attempt ended through RequestOwner and calls send() or give_up().
//
// Thread-safety: the proxy calls the handler methods (proxy thread), the owner calls send() and
// give_up() (any thread) only while no attempt runs; the client's disconnect (HTTP loop thread)
// cancels the running attempt at once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/http_server.h"
#include "node/request_model.h"
#include "node/stream_splice.h"
#include "node/upstream_proxy.h"

namespace gpufrac {

inline constexpr int kMaxResends = 3;

class RoutedRequest;

// How an attempt ended, for the router.
enum class AttemptEnd {
  kCompleted,   // the whole reply reached the client
  kClientGone,  // the client left (or the router is stopping)
  kLost,        // given up: the client got a 502 or a cut stream
  kRefused,     // the engine was not listening: send it elsewhere or later
  kRetry,       // send it again as it was (nothing reached the client)
  kResume,      // send it again to resume its stream
};

class RequestOwner {
 public:
  virtual ~RequestOwner() = default;
  // The attempt on `request->replica()` ended. `engine_failed`: the engine looked dead or
  // unable to serve (the router avoids it for a moment). For kRefused, kRetry and kResume the
  // owner must call send() or give_up() next; the other ends are final.
  virtual void attempt_ended(const std::shared_ptr<RoutedRequest>& request, AttemptEnd end,
                             bool engine_failed) = 0;
};

struct ClientRequest {
  size_t model = 0;  // the router's index
  std::string model_name;
  std::string target;  // "/v1/completions"
  std::string body;
  RequestModel requested;            // where "model" is in body
  std::vector<std::string> headers;  // forwarded header lines (Content-Type, Authorization, ...)
  bool resumable = false;            // the model's engine resumes streams (see above)
};

class RoutedRequest : public ProxyReplyHandler, public std::enable_shared_from_this<RoutedRequest> {
 public:
  // Watches the client from now on: a disconnect cancels the running attempt.
  static std::shared_ptr<RoutedRequest> create(RequestOwner& owner, ClientRequest request,
                                               std::shared_ptr<HttpResponse> response);

  // Sends the next attempt to replica `replica` at `upstream`; `served_name` (when not empty)
  // replaces the body's "model". A resume carries the token ids delivered so far.
  void send(UpstreamProxy& proxy, const ServerAddress& upstream, const std::string& served_name,
            int replica);
  // Ends the request without (the rest of) a reply: `status` with an OpenAI error body while the
  // client has seen nothing, else its stream is ended (the engine's held error event, if any,
  // then [DONE]) or cut.
  void give_up(int status, const std::string& message, const char* code,
               std::vector<std::string> headers = {});

  size_t model() const { return request_.model; }
  const std::string& model_name() const { return request_.model_name; }
  int replica() const { return replica_; }
  bool client_gone() const { return response_->client_gone(); }
  // When a wait for a ready replica must end (0: not waiting; the router's).
  int64_t hold_deadline_ns = 0;

  void on_reply_head(const HttpHead& head) override;
  bool on_reply_body(std::string_view bytes) override;
  void on_end(const ProxyResult& result) override;

 private:
  RoutedRequest(RequestOwner& owner, ClientRequest request, std::shared_ptr<HttpResponse> response);
  void client_left();
  AttemptEnd end_of_attempt(const ProxyResult& result, bool& engine_failed);
  // The attempt failed (engine_failed): retry, resume, or give up as the budget allows.
  AttemptEnd after_engine_failure(const ProxyResult& result);
  bool client_saw_nothing() const;
  void start_client_stream();
  void end_client_stream();  // [DONE] if the engine's did not pass yet, then the end
  std::string attempt_body(const std::string& served_name) const;

  RequestOwner& owner_;
  ClientRequest request_;
  std::shared_ptr<HttpResponse> response_;
  StreamSplice splice_;
  int replica_ = -1;
  int resends_ = 0;  // attempts after the first that reached an engine
  // The running attempt's reply.
  int status_ = 0;
  std::string content_type_;
  bool streaming_ = false;  // no Content-Length: relayed as it arrives
  bool framed_ = false;     // an SSE stream: relayed event by event
  std::string body_;        // a non-streamed reply, until complete
  std::string out_;         // scratch for what the client gets next
  // What the client has seen.
  bool client_started_ = false;  // the client's stream has started
  bool unframed_sent_ = false;   // bytes of a stream that is not SSE reached it
  bool answered_ = false;        // a whole response was sent
  // The running attempt, for cancelling it when the client leaves.
  std::mutex mutex_;
  UpstreamProxy* proxy_ = nullptr;
  uint64_t exchange_ = 0;
  uint64_t attempts_ = 0;
  bool gone_ = false;
};

}  // namespace gpufrac
