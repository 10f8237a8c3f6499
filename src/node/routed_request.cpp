#include "node/routed_request.h"

#include "common/log.h"

namespace gpufrac {

std::shared_ptr<RoutedRequest> RoutedRequest::create(RequestOwner& owner, ClientRequest request,
                                                     std::shared_ptr<HttpResponse> response) {
  std::shared_ptr<RoutedRequest> routed(
      new RoutedRequest(owner, std::move(request), std::move(response)));
  std::weak_ptr<RoutedRequest> weak = routed;
  routed->response_->on_disconnect([weak] {
    if (std::shared_ptr<RoutedRequest> alive = weak.lock()) alive->client_left();
  });
  return routed;
}

RoutedRequest::RoutedRequest(RequestOwner& owner, ClientRequest request,
                             std::shared_ptr<HttpResponse> response)
    : owner_(owner),
      request_(std::move(request)),
      response_(std::move(response)),
      splice_(request_.resumable) {}

void RoutedRequest::client_left() {
  UpstreamProxy* proxy = nullptr;
  uint64_t exchange = 0;
  {
    std::lock_guard lock(mutex_);
    gone_ = true;
    proxy = proxy_;
    exchange = exchange_;
  }
  if (proxy) proxy->cancel(exchange);
}

std::string RoutedRequest::attempt_body(const std::string& served_name) const {
  std::string body = served_name.empty() || served_name == request_.model_name
                         ? request_.body
                         : replace_request_model(request_.body, request_.requested, served_name);
  if (splice_.delivered_ids().empty()) return body;
  // The body is a JSON object (find_request_model saw its top level): the field goes last, so
  // that it wins over one the client might have sent.
  std::string field = ",\"resume_token_ids\":[";
  for (size_t i = 0; i < splice_.delivered_ids().size(); ++i) {
    if (i) field += ',';
    field += std::to_string(splice_.delivered_ids()[i]);
  }
  field += ']';
  body.insert(body.find_last_of('}'), field);
  return body;
}

void RoutedRequest::send(UpstreamProxy& proxy, const ServerAddress& upstream,
                         const std::string& served_name, int replica) {
  replica_ = replica;
  status_ = 0;
  content_type_.clear();
  streaming_ = framed_ = false;
  body_.clear();
  splice_.begin_attempt();
  ProxyRequest attempt;
  attempt.upstream = upstream;
  attempt.target = request_.target;
  attempt.body = attempt_body(served_name);
  attempt.headers = request_.headers;
  uint64_t sequence;
  {
    std::lock_guard lock(mutex_);
    proxy_ = &proxy;
    sequence = ++attempts_;
  }
  uint64_t exchange = proxy.forward(std::move(attempt), shared_from_this());
  bool cancel = false;
  {
    std::lock_guard lock(mutex_);
    if (attempts_ == sequence) {  // no later attempt started meanwhile (a refusal at once)
      exchange_ = exchange;
      cancel = gone_;
    }
  }
  if (cancel) proxy.cancel(exchange);
}

void RoutedRequest::on_reply_head(const HttpHead& head) {
  status_ = head.status;
  streaming_ = head.header("content-length").empty();
  std::string_view type = head.header("content-type");
  content_type_ = type.empty() ? (streaming_ ? "text/event-stream" : "application/json") : type;
  framed_ = streaming_ && status_ == 200 && content_type_.starts_with("text/event-stream");
}

bool RoutedRequest::on_reply_body(std::string_view bytes) {
  if (!streaming_) {
    body_.append(bytes);
    return true;
  }
  out_.clear();
  if (framed_) {
    splice_.feed(bytes, out_);
  } else {
    out_.assign(bytes);
    unframed_sent_ = true;
  }
  if (out_.empty()) return true;
  start_client_stream();
  return response_->write(out_);
}

void RoutedRequest::on_end(const ProxyResult& result) {
  bool engine_failed = false;
  AttemptEnd end = end_of_attempt(result, engine_failed);
  owner_.attempt_ended(shared_from_this(), end, engine_failed);
}

AttemptEnd RoutedRequest::end_of_attempt(const ProxyResult& result, bool& engine_failed) {
  switch (result.outcome) {
    case ProxyOutcome::kCancelled:
      return AttemptEnd::kClientGone;
    case ProxyOutcome::kMalformed:
      log_warn("router: model ", request_.model_name, ": ", result.error);
      give_up(502, "model '" + request_.model_name + "': " + result.error, "bad_gateway");
      return AttemptEnd::kLost;
    case ProxyOutcome::kRefused:
      engine_failed = true;
      return AttemptEnd::kRefused;
    case ProxyOutcome::kFailed:
      engine_failed = true;
      return after_engine_failure(result);
    case ProxyOutcome::kCompleted:
      break;
  }
  if (!streaming_) {
    if (status_ == 503 && client_saw_nothing() && resends_ < kMaxResends) {
      // The engine is stopping or starting: another one (or this one, back) may serve it.
      log_warn("router: model ", request_.model_name, " replica ", replica_,
               ": the engine answered 503; sending the request again");
      engine_failed = true;
      ++resends_;
      return AttemptEnd::kRetry;
    }
    if (client_started_) {  // an earlier attempt's stream is open: no whole reply fits in it
      response_->abort();
      return AttemptEnd::kLost;
    }
    response_->send(status_, content_type_, std::move(body_));
    answered_ = true;
    return AttemptEnd::kCompleted;
  }
  if (framed_ && splice_.track_tokens() && !splice_.finished()) {  // ended but not finished
    engine_failed = true;
    return after_engine_failure(result);
  }
  out_ = splice_.take_rest();
  start_client_stream();
  if (!out_.empty()) response_->write(out_);
  response_->end();
  return AttemptEnd::kCompleted;
}

AttemptEnd RoutedRequest::after_engine_failure(const ProxyResult& result) {
  std::string why =
      result.error.empty() ? "its engine ended the reply without finishing it" : result.error;
  log_warn("router: model ", request_.model_name, " replica ", replica_, ": ", why);
  if (splice_.finished()) {  // every token was delivered: only the stream's end is missing
    end_client_stream();
    return AttemptEnd::kCompleted;
  }
  bool resumable = splice_.resumable() && !splice_.delivered_ids().empty();
  bool retry = client_saw_nothing();
  std::string message = "model '" + request_.model_name + "': " + why;
  if (!retry && !resumable) {
    give_up(502, message, "engine_failed");  // a stream that cannot be resumed is cut
    return AttemptEnd::kLost;
  }
  if (resends_ >= kMaxResends) {
    give_up(502,
            message + " (the request reached an engine " + std::to_string(resends_ + 1) + " times)",
            "engine_failed");
    return AttemptEnd::kLost;
  }
  ++resends_;
  return retry ? AttemptEnd::kRetry : AttemptEnd::kResume;
}

bool RoutedRequest::client_saw_nothing() const {
  return !answered_ && !unframed_sent_ && splice_.events_delivered() == 0;
}

void RoutedRequest::start_client_stream() {
  if (client_started_) return;
  client_started_ = true;
  response_->start_stream(status_ ? status_ : 200, content_type_);
}

void RoutedRequest::end_client_stream() {
  if (!splice_.done()) response_->write("data: [DONE]\n\n");
  response_->end();
}

void RoutedRequest::give_up(int status, const std::string& message, const char* code,
                            std::vector<std::string> headers) {
  if (!client_started_ && !answered_) {
    answered_ = true;
    const char* type = status == 503 ? "service_unavailable" : "internal_server_error";
    response_->send(status, "application/json", openai_error_body(message, type, "model", code),
                    std::move(headers));
    return;
  }
  if (client_started_ && !splice_.held_error().empty()) {  // the engine's own error, then the end
    response_->write(splice_.held_error());
    end_client_stream();
    return;
  }
  response_->abort();  // the client sees the stream cut, as it was
}

}  // namespace gpufrac
