#pragma once
// The testbed model served over loopback HTTP on a free port, as `oscar serve` serves it, and
// the few requests the server tests make.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kvcache/kv_cache_config.h"
#include "kvcache/page_pool.h"
#include "loadgen/openai_client.h"
#include "server/background_server.h"
#include "support/kv_configs.h"

namespace oscar::testing {

struct TestServerOptions {
  KvCacheConfig kv = small_window_int2();
  KvPageCounts capacity{512, 512};
  int64_t max_num_seqs = 64;
  int64_t prefill_chunk_tokens = 64;
  int64_t max_model_len = 512;
  int port = 0;  // 0: any free port
  std::string api_key;
  size_t max_request_bytes = 1u << 20;
  int32_t failing_token = -1;  // >= 0: every step holding this token fails (FailingBackend)
  bool failing_token_is_fatal = false;  // ... and every step after it, as a dead rank's group
};

class TestServer {
 public:
  explicit TestServer(TestServerOptions options = {});

  ServerConnection connection() const { return {server_->url(), api_key_}; }
  httplib::Client client() const;  // with the API key, when the server has one
  EngineService& service() { return server_->service(); }
  int port() const { return server_->port(); }

  // A greedy completion, streamed; `on_chunk` may hang up.
  StreamedResponse stream(const std::string& prompt, int64_t max_tokens,
                          const ChunkCallback& on_chunk = {}) const;
  std::string metrics_text() const;
  // Waits (up to 30 s) until no request runs or waits, then drops the prefix cache: the pools'
  // free pages are back at their baseline unless a request leaked some.
  EngineSnapshot idle_snapshot();

 private:
  std::string api_key_;
  std::unique_ptr<BackgroundServer> server_;
};

// The body of a greedy streamed completion that generates exactly `max_tokens` tokens.
nlohmann::json greedy_body(const std::string& prompt, int64_t max_tokens);

// Distinct short prompts of varied length and content.
std::vector<std::string> distinct_prompts(size_t count);

// The value of one sample line of the Prometheus text, e.g.
// `oscar_kv_pages{format="bf16",state="free"}`; NaN when absent.
double metric_value(const std::string& metrics_text, const std::string& sample);

}  // namespace oscar::testing
