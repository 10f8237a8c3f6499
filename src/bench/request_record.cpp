#include "bench/request_record.h"

namespace gpufrac {

const char* status_name(RequestStatus status) {
  switch (status) {
    case RequestStatus::kOk:
      return "ok";
    case RequestStatus::kHttpError:
      return "http_error";
    case RequestStatus::kStreamError:
      return "stream_error";
    case RequestStatus::kTimeout:
      return "timeout";
    case RequestStatus::kConnectionError:
      return "connection_error";
  }
  return "?";
}

Json record_to_json(const RequestRecord& r) {
  auto stamp = [](int64_t ns) { return ns ? Json(ns) : Json(nullptr); };
  Json j;
  j["target"] = r.target;
  j["model"] = r.model;
  j["request_id"] = r.request_id;
  j["warmup"] = r.warmup;
  j["status"] = status_name(r.status);
  j["http_status"] = r.http_status ? Json(r.http_status) : Json(nullptr);
  j["error"] = r.error.empty() ? Json(nullptr) : Json(r.error);
  j["scheduled_ns"] = stamp(r.scheduled_ns);
  j["sent_ns"] = stamp(r.sent_ns);
  j["first_ns"] = stamp(r.first_ns);
  j["last_ns"] = stamp(r.last_ns);
  j["end_ns"] = stamp(r.end_ns);
  j["event_ns"] = r.event_ns;
  j["input_tokens"] = r.input_tokens;
  j["output_tokens"] = r.output_tokens;
  j["output_tokens_source"] = r.output_tokens_from_usage ? "usage" : "events";
  j["requested_input_tokens"] = r.requested_input_tokens;
  j["requested_output_tokens"] = r.requested_output_tokens;
  j["finish_reason"] = r.finish_reason.empty() ? Json(nullptr) : Json(r.finish_reason);
  return j;
}

}  // namespace gpufrac
