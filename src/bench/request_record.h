// One request as bench saw it: raw CLOCK_MONOTONIC timestamps and counts, from which every metric
// is computed afterwards (metrics.h). One line of records.jsonl (docs/result-format.md).
//
// Timestamps (ns, one monotonic clock; 0 = never happened, written as null):
//   scheduled_ns  when the load pattern wanted the request to start (closed loop: the moment its
//                 predecessor finished; open loop: the arrival time drawn from the rate)
//   sent_ns       when the whole request had been handed to the kernel (after any connect), the
//                 zero point of TTFT and latency; sent_ns - scheduled_ns is client-side queueing
//   first_ns / last_ns   arrival of the first / last content event's first byte
//   end_ns        when the response ended (its last byte, or the error / timeout)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"

namespace gpufrac {

enum class RequestStatus { kOk, kHttpError, kStreamError, kTimeout, kConnectionError };
const char* status_name(RequestStatus status);  // "ok", "http_error", ... as in the records

struct RequestRecord {
  int target = 0;
  std::string model;
  int64_t request_id = 0;  // unique within its target and run point; warmup requests come first
  bool warmup = false;
  RequestStatus status = RequestStatus::kOk;
  int http_status = 0;  // 0: no HTTP response head arrived
  std::string error;    // "" when ok
  int64_t scheduled_ns = 0;
  int64_t sent_ns = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  int64_t end_ns = 0;
  std::vector<int64_t> event_ns;  // every content event, in arrival order
  int64_t input_tokens = 0;       // usage.prompt_tokens, else what was sent
  int64_t output_tokens = 0;      // usage.completion_tokens, else the content events counted
  bool output_tokens_from_usage = false;
  int64_t requested_input_tokens = 0;  // the input length bench built the prompt to
  int64_t requested_output_tokens = 0;
  std::string finish_reason;  // the stream's last non-null finish_reason, "" when none came

  bool ok() const { return status == RequestStatus::kOk; }
};

Json record_to_json(const RequestRecord& record);

}  // namespace gpufrac
