#include "bench/server_token_counter.h"

#include "bench/stream_client.h"
#include "common/error.h"
#include "common/http_client.h"
#include "common/json.h"

namespace gpufrac {

ServerTokenCounter::ServerTokenCounter(const std::string& base_url, std::string model,
                                       Endpoint endpoint, const std::string& api_key,
                                       double timeout_s)
    : url_(base_url + "/tokenize"),
      model_(std::move(model)),
      endpoint_(endpoint),
      timeout_s_(timeout_s) {
  if (!api_key.empty()) headers_.push_back("Authorization: Bearer " + api_key);
}

int ServerTokenCounter::count(const std::string& text) const {
  Json body = {{"model", model_}};
  if (endpoint_ == Endpoint::kChat) {
    body["messages"] = Json::array({{{"role", "user"}, {"content", text}}});
    body["add_generation_prompt"] = true;
  } else {
    body["prompt"] = text;
  }
  ++calls_;
  HttpReply reply =
      http_request("POST", url_, body.dump(), timeout_s_, "application/json", headers_);
  if (reply.status == 404 || reply.status == 405 || reply.status == 501) {
    throw RuntimeFailure(
        std::string(endpoint_ == Endpoint::kChat ? "--endpoint chat" : "--prompt text") +
        " builds text prompts to the exact --isl with the server's POST /tokenize, but " + url_ +
        " answered " + error_from_body(reply.status, reply.body) +
        ": use a server that has /tokenize (vLLM, gpufrac serve) or token-id prompts "
        "(--endpoint completions --prompt ids)");
  }
  if (!reply.ok()) {
    throw RuntimeFailure("POST " + url_ + " failed (" +
                         (reply.status ? error_from_body(reply.status, reply.body) : reply.error) +
                         ")");
  }
  Json answer = Json::parse(reply.body, nullptr, false);
  if (answer.is_object()) {
    if (auto c = answer.find("count"); c != answer.end() && c->is_number_integer()) {
      return c->get<int>();
    }
    if (auto t = answer.find("tokens"); t != answer.end() && t->is_array()) return int(t->size());
  }
  throw RuntimeFailure("POST " + url_ +
                       " answered without \"count\" or \"tokens\": " + reply.body.substr(0, 200));
}

}  // namespace gpufrac
