#include "loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "format/documents.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace oscar {
namespace {

int64_t jittered(int64_t n, double jitter, std::mt19937_64& rng) {
  const auto low = std::max<int64_t>(1, std::llround(double(n) * (1 - jitter)));
  const auto high = std::max<int64_t>(low, std::llround(double(n) * (1 + jitter)));
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

// The documents' tokens end to end, enough for `needed` (fewer when the file holds fewer).
std::vector<int32_t> text_tokens(const std::string& path, const Tokenizer& tokenizer,
                                 int64_t needed) {
  std::vector<int32_t> tokens;
  for (const std::string& document : read_documents(path)) {
    const std::vector<int32_t> ids =
        tokenizer.encode(document + "\n\n", /*add_special_tokens=*/false);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    if (int64_t(tokens.size()) >= needed) break;
  }
  return tokens;
}

// A window of `length` tokens of `tokens` whose first token starts none of `requests`, searched
// from a random offset onwards (and around).
PlannedRequest warm_up_request(const std::vector<int32_t>& tokens, int64_t length,
                               const std::vector<PlannedRequest>& requests, std::mt19937_64& rng,
                               const std::string& text_path) {
  std::set<int32_t> first_tokens;
  for (const PlannedRequest& request : requests) first_tokens.insert(request.prompt.front());
  const int64_t offsets = int64_t(tokens.size()) - length + 1;
  const int64_t start = std::uniform_int_distribution<int64_t>(0, offsets - 1)(rng);
  for (int64_t i = 0; i < offsets; ++i) {
    const int64_t offset = (start + i) % offsets;
    if (first_tokens.count(tokens[size_t(offset)]) != 0) continue;
    PlannedRequest warm_up;
    warm_up.prompt.assign(tokens.begin() + offset, tokens.begin() + offset + length);
    warm_up.max_tokens = kWarmUpOutputTokens;
    return warm_up;
  }
  fail(
      "{}: every {}-token window of the text starts with a token a measured prompt starts with; no "
      "warm-up request would leave the prefix cache cold",
      text_path, length);
}

}  // namespace

PlannedWorkload plan_workload(const WorkloadOptions& o, const Tokenizer& tokenizer) {
  require(o.num_requests >= 1, "--num-requests must be at least 1, got {}", o.num_requests);
  require(o.input_tokens >= 1 && o.output_tokens >= 1,
          "--input-len and --output-len must be at least 1");
  require(o.length_jitter >= 0 && o.length_jitter < 1, "--len-jitter must lie in [0, 1), got {}",
          o.length_jitter);
  require(o.request_rate > 0, "--request-rate must be positive (inf: all at once), got {}",
          o.request_rate);
  std::mt19937_64 rng(o.seed);
  std::vector<PlannedRequest> requests(static_cast<size_t>(o.num_requests));
  int64_t longest = 0;
  for (PlannedRequest& request : requests) {
    request.prompt.resize(static_cast<size_t>(jittered(o.input_tokens, o.length_jitter, rng)));
    request.max_tokens = jittered(o.output_tokens, o.length_jitter, rng);
    longest = std::max(longest, int64_t(request.prompt.size()));
  }
  // Random windows of one long token stream: prompts rarely share a prefix (as with distinct
  // users), so the prefix cache does not flatter the numbers.
  const std::vector<int32_t> tokens =
      text_tokens(o.text_path, tokenizer, longest + std::max<int64_t>(8192, 64 * o.num_requests));
  require(int64_t(tokens.size()) > longest, "{}: {} tokens of text, too few for a {}-token prompt",
          o.text_path, tokens.size(), longest);
  double arrival = 0;
  std::exponential_distribution<double> gap(std::isinf(o.request_rate) ? 1.0 : o.request_rate);
  for (PlannedRequest& request : requests) {
    const auto length = int64_t(request.prompt.size());
    const int64_t offset =
        std::uniform_int_distribution<int64_t>(0, int64_t(tokens.size()) - length)(rng);
    std::copy_n(tokens.begin() + offset, length, request.prompt.begin());
    request.arrival_seconds = arrival;
    if (!std::isinf(o.request_rate)) arrival += gap(rng);
  }
  // Drawn after the measured requests, which stay what the seed gave them before.
  PlannedRequest warm_up = warm_up_request(tokens, longest, requests, rng, o.text_path);
  return {std::move(requests), std::move(warm_up)};
}

}  // namespace oscar
