// Reading a chat answer into reasoning_content, content and tool calls (vLLM's qwen3 reasoning
// parser and hermes tool parser), whole and streamed in pieces of every size.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/chat_output_parser.h"

namespace oscar {
namespace {

struct Case {
  const char* name;
  ChatOutputOptions options;
  std::string text;
  std::string reasoning, content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

const ChatOutputOptions kThinks{.split_reasoning = true};
const ChatOutputOptions kOpenThink{.split_reasoning = true, .starts_in_reasoning = true};
const ChatOutputOptions kTools{.parse_tool_calls = true};
const ChatOutputOptions kThinksWithTools{.split_reasoning = true, .parse_tool_calls = true};

std::vector<Case> cases() {
  return {
      {"plain",
       {},
       "Hello <think>x</think> <tool_call>{}</tool_call>",
       "",
       "Hello <think>x</think> <tool_call>{}</tool_call>",
       {}},
      {"reasoning then answer",
       kThinks,
       "<think>\nLet me see.\n</think>\n\nFour.",
       "\nLet me see.\n",
       "\n\nFour.",
       {}},
      {"no think block", kThinks, "Just an answer.", "", "Just an answer.", {}},
      {"prompt opened the block", kOpenThink, "hmm, 2+2\n</think>\n\n4", "hmm, 2+2\n", "\n\n4", {}},
      {"reasoning cut off", kOpenThink, "still thinking", "still thinking", "", {}},
      {"one call",
       kTools,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>",
       "",
       "",
       {{"get_weather", "{\"city\":\"Paris\"}"}}},
      {"text, two calls",
       kTools,
       "Checking.\n<tool_call>\n{\"name\": \"a\", \"arguments\": "
       "{}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
       "\"arguments\": {\"q\": [1, \"x\"]}}\n</tool_call>",
       "",
       "Checking.\n",
       {{"a", "{}"}, {"b", "{\"q\":[1,\"x\"]}"}}},
      {"malformed call stays text",
       kTools,
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {oops}\n</tool_call>",
       "",
       "<tool_call>\n{\"name\": \"a\", \"arguments\": {oops}\n</tool_call>",
       {}},
      {"unclosed call stays text",
       kTools,
       "ok <tool_call>\n{\"name\": \"a\"",
       "",
       "ok <tool_call>\n{\"name\": \"a\"",
       {}},
      {"good and bad calls",
       kTools,
       "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>[1]</tool_call>",
       "",
       "<tool_call>[1]</tool_call>",
       {{"a", "{}"}}},
      {"thinking, then a call",
       kThinksWithTools,
       "<think>need weather</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": "
       "\"Köln\"}}\n</tool_call>",
       "need weather",
       "\n\n",
       {{"w", "{\"c\":\"Köln\"}"}}},
      {"tags that only look alike",
       kThinksWithTools,
       "<thinking> <tool_> </tool_call",
       "",
       "<thinking> <tool_> </tool_call",
       {}},
  };
}

void expect_parsed(const Case& c, const ChatOutputDelta& got, const std::string& how) {
  EXPECT_EQ(got.reasoning, c.reasoning) << c.name << how;
  EXPECT_EQ(got.content, c.content) << c.name << how;
  ASSERT_EQ(got.tool_calls.size(), c.calls.size()) << c.name << how;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, c.calls[i].first) << c.name << how;
    EXPECT_EQ(got.tool_calls[i].arguments, c.calls[i].second) << c.name << how;
    EXPECT_TRUE(got.tool_calls[i].id.starts_with("call_")) << c.name << how;
  }
}

TEST(ChatOutputParser, SplitsWholeAnswers) {
  for (const Case& c : cases()) {
    ChatOutputParser parser(c.options);
    ChatOutputDelta got = parser.push(c.text);
    got.append(parser.finish());
    expect_parsed(c, got, "");
  }
}

TEST(ChatOutputParser, StreamsInPiecesOfEverySize) {
  for (const Case& c : cases()) {
    for (size_t piece = 1; piece <= 7; ++piece) {
      ChatOutputParser parser(c.options);
      ChatOutputDelta got;
      for (size_t at = 0; at < c.text.size(); at += piece)
        got.append(parser.push(c.text.substr(at, piece)));
      got.append(parser.finish());
      expect_parsed(c, got, " in pieces of " + std::to_string(piece));
    }
  }
}

TEST(ChatOutputParser, HoldsBackOnlyWhatMayBeATag) {
  ChatOutputParser parser(kThinksWithTools);
  EXPECT_EQ(parser.push("<think>a</th").reasoning, "a");
  EXPECT_EQ(parser.push("ink>b <tool").content, "b ");
  const ChatOutputDelta call = parser.push("_call>{\"name\": \"f\"}</tool_call>");
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0].name, "f");
  EXPECT_TRUE(parser.finish().empty());
}

}  // namespace
}  // namespace oscar
