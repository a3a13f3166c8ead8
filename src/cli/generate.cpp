// oscar generate: stream a continuation of one prompt to stdout, a summary to stderr.
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "cli/step_token_options.h"
#include "kvcache/page_layout.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar::cli {
namespace {

struct GenerateOptions {
  ModelOptions model;
  std::string prompt;
  std::string prompt_file;
  bool chat = false;
  int64_t max_tokens = 128;
  float temperature = 0.7f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
  StepTokenOptions step_tokens;
};

std::string prompt_text(const GenerateOptions& o) {
  require(o.prompt.empty() != o.prompt_file.empty(),
          "give exactly one of --prompt and --prompt-file");
  return o.prompt_file.empty() ? o.prompt : read_file(o.prompt_file);
}

void run_generate(const GenerateOptions& o) {
  const ModelSession session = open_model(o.model);
  const ModelConfig& model = session.weights.config;
  std::string text = prompt_text(o);
  bool add_special_tokens = true;
  if (o.chat) {
    const ChatTemplate chat_template =
        ChatTemplate::load(session.model_dir, model.architecture_name);
    text = chat_template.render(
        nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}}), {});
    add_special_tokens = !chat_template.writes_special_tokens();
  }
  GenerationRequest request;
  request.prompt = session.tokenizer->encode(text, add_special_tokens);
  require(!request.prompt.empty(), "the prompt is empty");
  require(o.max_tokens >= 1, "--max-tokens must be at least 1, got {}", o.max_tokens);
  const int64_t context = model.max_position_embeddings;
  require(int64_t(request.prompt.size()) < context,
          "the prompt has {} tokens; the model's context is {} tokens", request.prompt.size(),
          context);
  request.stop.max_tokens = std::min(o.max_tokens, context - int64_t(request.prompt.size()));
  request.stop.stop_strings = o.stop;
  if (!o.ignore_eos) request.stop.stop_token_ids = session.eos_token_ids;
  request.stop.min_tokens = o.min_tokens;
  request.sampling.temperature = o.temperature;
  request.sampling.top_p = o.top_p;
  request.sampling.top_k = o.top_k;
  request.sampling.min_p = o.min_p;
  request.sampling.repetition_penalty = o.repetition_penalty;
  request.sampling.frequency_penalty = o.frequency_penalty;
  request.sampling.presence_penalty = o.presence_penalty;
  request.sampling.seed = o.seed;

  EngineOptions engine_options;
  engine_options.scheduler = scheduler_options(o.step_tokens, session.device, 1);
  const int64_t total = int64_t(request.prompt.size()) + request.stop.max_tokens;
  auto engine =
      make_engine(session,
                  capacity_for_sequences(session.kv, total, 1,
                                         max_new_tokens_per_step(engine_options.scheduler)),
                  engine_options);
  engine->submit(std::move(request));
  int64_t prompt_tokens = 0, generated = 0;
  std::string error;
  while (!engine->idle()) {
    for (const RequestOutput& output : engine->step()) {
      std::fwrite(output.text.data(), 1, output.text.size(), stdout);
      std::fflush(stdout);
      prompt_tokens = output.prompt_tokens;
      generated = output.generated_tokens;
      if (output.finish_reason == FinishReason::error) error = output.error;
    }
  }
  std::fputc('\n', stdout);
  if (!error.empty()) fail("generation failed: {}", error);
  const EngineCounters& c = engine->counters();
  const double prefill_rate =
      c.prefill_seconds > 0 ? double(c.prefill_only_tokens) / c.prefill_seconds : 0;
  const double decode_rate =
      c.decode_seconds > 0 ? double(c.decode_only_tokens) / c.decode_seconds : 0;
  fmt::print(
      stderr,
      "[oscar] {} on {}: prompt {} tokens, generated {} tokens; prefill {:.1f} tok/s, decode "
      "{:.1f} tok/s\n[oscar] KV cache {}\n",
      model.architecture_name, engine->backend().device_name(), prompt_tokens, generated,
      prefill_rate, decode_rate,
      describe_kv_footprint(session.kv, model, prompt_tokens + generated));
}

}  // namespace

void register_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command = app.add_subcommand("generate", "Generate a continuation of a prompt");
  add_model_options(*command, options->model);
  command->add_option("--prompt,-p", options->prompt, "prompt text");
  command->add_option("--prompt-file", options->prompt_file, "read the prompt from a file");
  command->add_flag("--chat", options->chat, "wrap the prompt in the model's chat template");
  command->add_option("--max-tokens,-n", options->max_tokens, "tokens to generate")
      ->capture_default_str();
  command->add_option("--temperature,-t", options->temperature, "0: greedy")->capture_default_str();
  command->add_option("--top-p", options->top_p)->capture_default_str();
  command->add_option("--top-k", options->top_k, "0: off")->capture_default_str();
  command->add_option("--min-p", options->min_p)->capture_default_str();
  command->add_option("--repetition-penalty", options->repetition_penalty)->capture_default_str();
  command->add_option("--frequency-penalty", options->frequency_penalty, "OpenAI's, in [-2, 2]")
      ->capture_default_str();
  command->add_option("--presence-penalty", options->presence_penalty, "OpenAI's, in [-2, 2]")
      ->capture_default_str();
  command->add_option("--seed", options->seed, "random seed (default: random)");
  command->add_option("--stop", options->stop, "stop string (repeatable)");
  command->add_flag("--ignore-eos", options->ignore_eos, "keep generating after EOS");
  command
      ->add_option("--min-tokens", options->min_tokens,
                   "no EOS or stop string before this many new tokens")
      ->capture_default_str();
  add_step_token_options(*command, options->step_tokens);
  command->callback([options] { run_generate(*options); });
}

}  // namespace oscar::cli
