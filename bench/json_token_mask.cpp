// JSON mode's token mask (engine/json_object_grammar.h): one step's mask at grammar states inside
// and outside strings, over the testbed's vocabulary (8,192 tokens) and over one of Qwen3's size
// (151,936 rows: the testbed's tokens and concatenations of two or three of them, up to 24 bytes,
// about as long as a large BPE vocabulary's). Results: docs/bench section (e).
#include <benchmark/benchmark.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/json_object_grammar.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::string> testbed_tokens() {
  const oscar::Tokenizer tokenizer =
      oscar::Tokenizer::load(std::string(OSCAR_SOURCE_DIR) + "/models/testbed");
  std::vector<std::string> tokens(size_t(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.is_special(id)) tokens[size_t(id)] = tokenizer.token_bytes(id);
  }
  return tokens;
}

std::vector<std::string> qwen3_sized_tokens() {
  std::vector<std::string> tokens = testbed_tokens();
  std::set<std::string> seen(tokens.begin(), tokens.end());
  std::mt19937 generator(1);
  std::uniform_int_distribution<size_t> pick(1, tokens.size() - 1);
  const size_t base = tokens.size();
  while (tokens.size() < 151936) {
    std::string token;
    const int parts = 2 + int(generator() % 3 == 0);
    for (int part = 0; part < parts; ++part) token += tokens[pick(generator) % base];
    if (token.size() <= 24 && seen.insert(token).second) tokens.push_back(token);
  }
  return tokens;
}

const oscar::JsonTokenMask& mask(int64_t vocabulary) {
  static const oscar::JsonTokenMask testbed(testbed_tokens());
  static const oscar::JsonTokenMask large(qwen3_sized_tokens());
  return vocabulary == 0 ? testbed : large;
}

// The text so far of each state benchmarked (argument 1).
const char* const kStates[] = {"{\"name\": \"fox", "{", "{\"a\": 12", "{\"a\": [1, "};

void BM_JsonTokenMask(benchmark::State& state) {
  const oscar::JsonTokenMask& m = mask(state.range(0));
  oscar::JsonObjectGrammar grammar;
  grammar.feed(kStates[state.range(1)]);
  std::vector<int32_t> excluded;
  for (auto _ : state) {
    excluded.clear();
    m.exclude(grammar, excluded);
    benchmark::DoNotOptimize(excluded.data());
  }
  state.SetLabel(std::string(state.range(0) == 0 ? "testbed 8192" : "Qwen3-sized 151936") +
                 ", after " + kStates[state.range(1)]);
  state.counters["excluded"] = double(excluded.size());
}
BENCHMARK(BM_JsonTokenMask)->ArgsProduct({{0, 1}, {0, 1, 2, 3}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
