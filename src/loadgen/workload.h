#pragma once
// What a serving benchmark sends: prompts cut from real text to the requested token lengths,
// output lengths, and arrival times (all at once, or a Poisson process), reproducible from a seed.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace oscar {

class Tokenizer;

struct WorkloadOptions {
  std::string text_path;  // documents (format/documents.h: *.xz, *.jsonl or plain text)
  int64_t num_requests = 64;
  int64_t input_tokens = 128;
  int64_t output_tokens = 64;
  // Each length is drawn uniformly from [n (1 - jitter), n (1 + jitter)] (0: every request alike).
  double length_jitter = 0;
  // Mean arrivals per second of a Poisson process; infinity: every request arrives at the start.
  double request_rate = std::numeric_limits<double>::infinity();
  uint64_t seed = 0;
};

struct PlannedRequest {
  std::vector<int32_t>
      prompt;  // token ids: the length is exact whatever the server's tokenizer does to text
  int64_t max_tokens = 0;      // generated exactly (the request ignores EOS)
  double arrival_seconds = 0;  // after the start of the run
};

// The requests a run measures, and one sent before the clock starts: it fails fast on a wrong URL,
// key or length limit and pays the server's one-time costs (page faults, buffers grown to the
// longest prompt). It is as long as the longest prompt, but starts with a token no measured prompt
// starts with, so it leaves nothing in the prefix cache that a measured request could reuse.
struct PlannedWorkload {
  std::vector<PlannedRequest> requests;
  PlannedRequest warm_up;
};

// The warm-up's generated tokens.
inline constexpr int64_t kWarmUpOutputTokens = 4;

// Throws Error naming the option at fault, or when the text holds too few tokens.
PlannedWorkload plan_workload(const WorkloadOptions& options, const Tokenizer& tokenizer);

}  // namespace oscar
