#pragma once
// Splits a chat model's generated text into the OpenAI message fields, as vLLM's
// `--reasoning-parser qwen3` and `--tool-call-parser hermes` do: the reasoning before `</think>`
// goes to reasoning_content, each `<tool_call>{"name": ..., "arguments": ...}</tool_call>` block
// becomes a tool call, the rest is content. A block whose JSON is malformed (or never closed)
// stays in the content as text. Works on the stream: text that may be the start of a tag is held
// back until the next piece tells.
#include <string>
#include <string_view>
#include <vector>

namespace oscar {

struct ParsedToolCall {
  std::string id;  // "call_..."
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ChatOutputDelta {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(ChatOutputDelta&& later) {
    reasoning += later.reasoning;
    content += later.content;
    for (ParsedToolCall& call : later.tool_calls) tool_calls.push_back(std::move(call));
  }
};

struct ChatOutputOptions {
  bool split_reasoning = false;      // the template thinks in <think> blocks (Qwen3)
  bool starts_in_reasoning = false;  // the prompt ends inside an open <think> block
  bool parse_tool_calls = false;     // the request lists tools and tool_choice is not "none"
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputOptions& options);

  ChatOutputDelta push(std::string_view text);
  ChatOutputDelta finish();  // whatever was held back, as text

 private:
  void parse(ChatOutputDelta& out, bool at_end);
  bool parse_reasoning(ChatOutputDelta& out, bool at_end);
  bool parse_content(ChatOutputDelta& out, bool at_end);

  ChatOutputOptions options_;
  enum class State { undecided, reasoning, content } state_;
  std::string pending_;  // text not yet given out
  bool after_call_ = false;
};

}  // namespace oscar
