#include "server_fixture.h"

#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/model_config.h"
#include "model/model_weights.h"
#include "support/failing_backend.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace oscar::testing {
namespace {

const ModelWeights& testbed() {
  static const ModelWeights weights = load_model(testbed_model_dir());
  return weights;
}

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::load(testbed_model_dir());
  return t;
}

std::vector<int32_t> eos_token_ids() {
  std::vector<int32_t> ids;
  for (const int64_t id : load_eos_token_ids(testbed_model_dir(), testbed().config))
    ids.push_back(int32_t(id));
  return ids;
}

}  // namespace

TestServer::TestServer(TestServerOptions options) : api_key_(options.api_key) {
  BackendOptions backend;
  backend.kv = options.kv;
  backend.capacity = options.capacity;
  EngineOptions engine;
  engine.scheduler.max_num_seqs = options.max_num_seqs;
  engine.scheduler.prefill_chunk_tokens = options.prefill_chunk_tokens;
  engine.scheduler.max_step_tokens = 512;
  engine.max_model_len = options.max_model_len;
  HttpServerOptions http;
  http.port = options.port;
  http.api_key = options.api_key;
  http.max_request_bytes = options.max_request_bytes;
  std::unique_ptr<Backend> model_backend = make_backend(testbed(), backend);
  if (options.failing_token >= 0) {
    model_backend = std::make_unique<FailingBackend>(
        std::move(model_backend), options.failing_token, options.failing_token_is_fatal);
  }
  server_ = std::make_unique<BackgroundServer>(
      std::make_unique<Engine>(std::move(model_backend), &tokenizer(), engine),
      make_served_model("testbed", tokenizer(), testbed().config.architecture_name, eos_token_ids(),
                        options.max_model_len),
      http);
}

httplib::Client TestServer::client() const {
  httplib::Client client(server_->url());
  client.set_read_timeout(60, 0);
  if (!api_key_.empty()) client.set_bearer_token_auth(api_key_);
  return client;
}

StreamedResponse TestServer::stream(const std::string& prompt, int64_t max_tokens,
                                    const ChunkCallback& on_chunk) const {
  return stream_completion(connection(), "/v1/completions", greedy_body(prompt, max_tokens),
                           on_chunk);
}

std::string TestServer::metrics_text() const {
  const httplib::Result result = client().Get("/metrics");
  if (!result || result->status != 200) {
    ADD_FAILURE() << "GET /metrics failed";
    return {};
  }
  return result->body;
}

EngineSnapshot TestServer::idle_snapshot() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    const EngineSnapshot s = service().snapshot();
    if (s.running == 0 && s.waiting == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the engine does not become idle: " << s.running << " running, " << s.waiting
                    << " waiting";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  service().reset_prefix_cache();
  return service().snapshot();
}

nlohmann::json greedy_body(const std::string& prompt, int64_t max_tokens) {
  return {{"model", "testbed"},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

std::vector<std::string> distinct_prompts(size_t count) {
  static const std::vector<std::string> openings = {
      "The quick brown fox",     "#include <linux/module.h>\nstatic int",
      "for (i = 0; i < n; i++)", "Debian packages are built from",
      "int main(void) {",        "struct file_operations fops = {",
      "The history of the city", "def parse(text):\n    "};
  std::vector<std::string> prompts;
  for (size_t i = 0; i < count; ++i) {
    // Lengths vary with i, so prefills of different sizes share steps.
    prompts.push_back(
        fmt::format("{} {}{}", openings[i % openings.size()], i, std::string(i % 5, '!')));
  }
  return prompts;
}

double metric_value(const std::string& text, const std::string& sample) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > sample.size() && line.compare(0, sample.size(), sample) == 0 &&
        line[sample.size()] == ' ') {
      return std::stod(line.substr(sample.size() + 1));
    }
  }
  return std::nan("");
}

}  // namespace oscar::testing
