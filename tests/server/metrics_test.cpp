// /metrics speaks the Prometheus text format and exposes the KV cache (pages by format and state,
// bits per element, prefix-cache hit rate, usage), the batch, and TTFT/ITL histograms that move
// with the traffic; and, under vLLM's names, the queue, the batch and the KV-cache usage that
// gateways balance replicas by.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "server_fixture.h"
#include "support/test_paths.h"

namespace oscar::testing {
namespace {

// Checks the exposition format line by line; returns each family's declared TYPE.
std::map<std::string, std::string> check_text_format(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*)");
  static const std::regex type(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*",?)*\})? (\S+))");
  std::map<std::string, std::string> types;
  std::map<std::string, bool> helped;
  std::istringstream lines(text);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, m, help)) {
      helped[m[1]] = true;
    } else if (std::regex_match(line, m, type)) {
      EXPECT_TRUE(helped[m[1]]) << "TYPE before HELP: " << line;
      EXPECT_EQ(types.count(m[1]), 0u) << "family declared twice: " << line;
      types[m[1]] = m[2];
    } else if (std::regex_match(line, m, sample)) {
      std::string family = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (types.count(family) == 0 && family.size() > s.size() && family.ends_with(s)) {
          family.resize(family.size() - s.size());
        }
      }
      EXPECT_EQ(types.count(family), 1u) << "sample without a TYPE: " << line;
      const std::string value = m[4];
      if (value != "+Inf" && value != "-Inf" && value != "NaN") {
        size_t used = 0;
        EXPECT_NO_THROW(std::stod(value, &used)) << line;
        EXPECT_EQ(used, value.size()) << line;
      }
    } else {
      ADD_FAILURE() << "not a Prometheus text line: '" << line << "'";
    }
  }
  return types;
}

double value(const std::string& text, const std::string& sample) {
  const double v = metric_value(text, sample);
  EXPECT_FALSE(std::isnan(v)) << "no sample " << sample;
  return v;
}

const std::string kVllmRunning = R"(vllm:num_requests_running{model_name="testbed"})";
const std::string kVllmWaiting = R"(vllm:num_requests_waiting{model_name="testbed"})";
const std::string kVllmKvUsage = R"(vllm:kv_cache_usage_perc{model_name="testbed"})";

const std::string kPages = "oscar_kv_pages";
std::string pages(const char* format, const char* state) {
  return kPages + "{format=\"" + format + "\",state=\"" + state + "\"}";
}

TEST(Metrics, TextFormatAndKvCacheGaugesThatMove) {
  TestServerOptions options;
  options.capacity = {128, 96};
  TestServer server(options);
  const std::string before = server.metrics_text();
  const auto types = check_text_format(before);
  EXPECT_EQ(types.at("oscar_time_to_first_token_seconds"), "histogram");
  EXPECT_EQ(types.at("oscar_inter_token_latency_seconds"), "histogram");
  EXPECT_EQ(types.at("oscar_kv_pages"), "gauge");
  EXPECT_EQ(types.at("oscar_num_requests_running"), "gauge");
  EXPECT_EQ(types.at("oscar_num_requests_waiting"), "gauge");
  EXPECT_EQ(types.at("oscar_kv_bits_per_element"), "gauge");
  EXPECT_EQ(types.at("oscar_prefix_cache_hit_rate"), "gauge");
  EXPECT_EQ(types.at("oscar_kv_cache_usage"), "gauge");
  for (const char* family :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"}) {
    EXPECT_EQ(types.at(family), "gauge") << family;
  }
  EXPECT_EQ(value(before, kVllmRunning), 0);
  EXPECT_EQ(value(before, kVllmWaiting), 0);
  EXPECT_EQ(value(before, kVllmKvUsage), 0);
  EXPECT_EQ(value(before, pages("bf16", "free")), 128);
  EXPECT_EQ(value(before, pages("quantized", "free")), 96);
  EXPECT_EQ(value(before, pages("band", "free")), 0);  // no --kv-band-tokens: no band pool
  EXPECT_EQ(value(before, "oscar_time_to_first_token_seconds_count"), 0);
  EXPECT_EQ(value(before, "oscar_prefix_cache_hit_rate"), 0);

  // The same 40-odd-token prompt twice: the second finds its full pages in the prefix cache, and
  // the pages of both stay there (in use, but no running request's).
  const std::string prompt =
      "Debian packages are built from source packages by the maintainers, who upload "
      "them to the archive where the build daemons compile them for every architecture.";
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(server.stream(prompt, 100).ok());

  // While a request runs past its full-precision window, the gauges describe it.
  std::string during;
  int chunks = 0;
  const StreamedResponse running =
      server.stream("The quick brown fox", 200, [&](const nlohmann::json&) {
        if (++chunks == 150) during = server.metrics_text();
        return true;
      });
  ASSERT_TRUE(running.ok()) << running.error;
  check_text_format(during);
  EXPECT_EQ(value(during, "oscar_num_requests_running"), 1);
  EXPECT_EQ(value(during, "oscar_num_requests_waiting"), 0);
  EXPECT_EQ(value(during, kVllmRunning), 1);
  EXPECT_EQ(value(during, kVllmWaiting), 0);
  // The fullest pool's share held by the request: at least its own full-precision pages (a sink
  // page and the window's), at most all of them.
  EXPECT_GE(value(during, kVllmKvUsage), 2.0 / 128);
  EXPECT_LE(value(during, kVllmKvUsage), 1.0);
  EXPECT_EQ(value(during, "oscar_kv_cache_usage"), value(during, kVllmKvUsage));
  EXPECT_GT(value(during, pages("quantized", "used")), 0);
  EXPECT_EQ(value(during, pages("bf16", "used")) + value(during, pages("bf16", "free")), 128);
  EXPECT_EQ(value(during, pages("quantized", "used")) + value(during, pages("quantized", "free")),
            96);
  // Of the running request's own pages, not of the cached prefixes. At T >= 150 tokens it holds at
  // most 4 full-precision pages (sink page, window of 24 over up to 3 pages) of 16 tokens at 16
  // bits, and ceil(T / 16) quantized pages at 2 bits plus a 32-bit scale and zero per 128
  // channels: (4*16*16 + 10*16*2.25) / 150 < 10.
  const double bits = value(during, "oscar_kv_bits_per_element");
  EXPECT_GT(bits, 2.25);
  EXPECT_LT(bits, 10.0);

  const std::string after = server.metrics_text();
  check_text_format(after);
  EXPECT_EQ(value(after, "oscar_requests_total{outcome=\"ok\"}"), 3);
  EXPECT_EQ(value(after, "oscar_time_to_first_token_seconds_count"), 3);
  EXPECT_EQ(value(after, "oscar_time_to_first_token_seconds_bucket{le=\"+Inf\"}"), 3);
  EXPECT_GT(value(after, "oscar_time_to_first_token_seconds_sum"), 0);
  EXPECT_EQ(value(after, "oscar_inter_token_latency_seconds_count"), 99 + 99 + 199);
  EXPECT_EQ(value(after, "oscar_generation_tokens_total"), 100 + 100 + 200);
  EXPECT_GT(value(after, "oscar_prefix_cache_hit_rate"), 0.1);
  EXPECT_LT(value(after, "oscar_prefix_cache_hit_rate"), 1.0);
  EXPECT_EQ(value(after, "oscar_num_requests_running"), 0);
  // Idle: the cached prefixes still hold pages, which count as free (the cache gives them up).
  EXPECT_GT(value(after, pages("bf16", "used")), 0);
  EXPECT_EQ(value(after, kVllmKvUsage), 0);
  double previous = 0;
  for (const char* le : {"0.01", "0.1", "1", "10", "+Inf"}) {
    const double cumulative =
        value(after, std::string("oscar_time_to_first_token_seconds_bucket{le=\"") + le + "\"}");
    EXPECT_GE(cumulative, previous) << le;
    previous = cumulative;
  }
}

// With room for one sequence, a second request waits: the gauge a gateway reads the queue from.
TEST(Metrics, VllmGaugesShowTheQueue) {
  TestServerOptions options;
  options.max_num_seqs = 1;
  TestServer server(options);
  const std::vector<std::string> prompts = distinct_prompts(2);
  // Long enough that the second request waits while the first runs: the sanitizers' build decodes
  // several times slower, so fewer tokens keep it as long.
  const int64_t max_tokens = kSanitized ? 60 : 300;
  std::vector<StreamedResponse> responses(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { responses[i] = server.stream(prompts[i], max_tokens); });
  }
  bool queued = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!queued && std::chrono::steady_clock::now() < deadline) {
    const std::string text = server.metrics_text();
    queued = metric_value(text, kVllmRunning) == 1 && metric_value(text, kVllmWaiting) == 1;
    if (queued) {
      EXPECT_EQ(value(text, "oscar_num_requests_waiting"), 1);
      EXPECT_GT(value(text, kVllmKvUsage), 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (std::thread& client : clients) client.join();
  EXPECT_TRUE(queued) << "never saw one request running and one waiting";
  for (const StreamedResponse& response : responses) EXPECT_TRUE(response.ok()) << response.error;
  const std::string after = server.metrics_text();
  EXPECT_EQ(value(after, kVllmRunning), 0);
  EXPECT_EQ(value(after, kVllmWaiting), 0);
}

}  // namespace
}  // namespace oscar::testing
