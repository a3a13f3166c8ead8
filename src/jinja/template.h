#pragma once
// A Jinja template as Hugging Face chat templates use the language: parsed once, rendered many
// times. Rendering is sandboxed: it runs a bounded number of steps, nests calls to a bounded
// depth and writes a bounded amount of text, and never touches files or the environment.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/syntax_tree.h"

namespace oscar::jinja {

struct RenderLimits {
  int64_t max_steps = 2'000'000;        // statements run, loop iterations and items built
  int max_call_depth = 64;              // macros calling macros
  size_t max_output_bytes = 16u << 20;  // the rendered text, and any string built on the way
};

class Template {
 public:
  // Throws Error ("template line N: ...") on a syntax error.
  explicit Template(std::string_view source);
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;
  ~Template();

  // `context`'s keys are the template's variables (messages, tools, add_generation_prompt, ...).
  // Throws Error naming the template line at fault; raise_exception(message) in the template
  // throws Error with that message.
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;

 private:
  std::unique_ptr<StatementList> statements_;
};

}  // namespace oscar::jinja
