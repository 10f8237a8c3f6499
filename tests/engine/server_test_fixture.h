// An OpenAI server on a FakeRunner, in-process, on an ephemeral port: what the server tests and
// the live fuzz test run against.
#pragma once

#include <memory>
#include <string>

#include "engine/api/openai_server.h"
#include "engine/engine.h"
#include "fakes/fake_runner.h"

namespace gpufrac::testing {

struct ServerSetup {
  fakes::FakeRunnerOptions runner;
  int num_kv_blocks = 256;
  int block_size = 4;
  int max_model_len = 128;
  int max_num_seqs = 64;
  int max_num_batched_tokens = 256;
  engine::KvAdmission kv_admission = engine::KvAdmission::kReserve;
  int max_waiting_requests = 1024;
  uint64_t max_body_bytes = 1 << 20;
  std::string model_name = "fake-model";
  const engine::ServedTokenizer* tokenizer = nullptr;  // borrowed; null: token ids only
};

class FakeServer {
 public:
  explicit FakeServer(ServerSetup setup = {})
      : setup_(setup), runner_(setup.runner), engine_(runner_, engine_options(setup)) {
    engine::OpenAiServerOptions options;
    options.served_model_name = setup.model_name;
    options.http.port = 0;
    options.http.max_body_bytes = setup.max_body_bytes;
    options.tokenizer = setup.tokenizer;
    server_ = std::make_unique<engine::OpenAiServer>(engine_, options);
    engine_.start();
    server_->start();
  }
  ~FakeServer() {
    server_->stop();
    engine_.stop();
  }

  int port() const { return server_->port(); }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port()) + path;
  }
  engine::Engine& engine() { return engine_; }
  fakes::FakeRunner& runner() { return runner_; }

 private:
  static engine::EngineOptions engine_options(const ServerSetup& s) {
    engine::EngineOptions o;
    o.num_kv_blocks = s.num_kv_blocks;
    o.block_size = s.block_size;
    o.max_model_len = s.max_model_len;
    o.scheduler = {.admission = s.kv_admission,
                   .max_num_seqs = s.max_num_seqs,
                   .max_num_batched_tokens = s.max_num_batched_tokens};
    o.max_waiting_requests = s.max_waiting_requests;
    return o;
  }

  ServerSetup setup_;
  fakes::FakeRunner runner_;
  engine::Engine engine_;
  std::unique_ptr<engine::OpenAiServer> server_;
};

}  // namespace gpufrac::testing
