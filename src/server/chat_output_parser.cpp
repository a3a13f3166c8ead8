#include "server/chat_output_parser.h"

#include <atomic>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace oscar {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

// How many bytes at the end of `text` could begin `tag` (held back in a stream).
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t length = std::min(text.size(), tag.size() - 1); length > 0; --length) {
    if (text.substr(text.size() - length) == tag.substr(0, length)) return length;
  }
  return 0;
}

std::string new_call_id() {
  static std::atomic<uint64_t> counter{0};
  const auto now = uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  return fmt::format("call_{:x}{:04x}", now & 0xffffffffffff, counter++ & 0xffff);
}

// Hermes' block body: {"name": "...", "arguments": {...}} (arguments may be absent: {}).
bool read_tool_call(std::string_view body, ParsedToolCall& call) {
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("name") || !json["name"].is_string()) return false;
  const auto arguments = json.find("arguments");
  if (arguments != json.end() && !arguments->is_object()) return false;
  call.name = json["name"];
  call.arguments = arguments == json.end()
                       ? "{}"
                       : arguments->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return true;
}

}  // namespace

ChatOutputParser::ChatOutputParser(const ChatOutputOptions& options)
    : options_(options),
      state_(!options.split_reasoning      ? State::content
             : options.starts_in_reasoning ? State::reasoning
                                           : State::undecided) {}

ChatOutputDelta ChatOutputParser::push(std::string_view text) {
  pending_ += text;
  ChatOutputDelta out;
  parse(out, false);
  return out;
}

ChatOutputDelta ChatOutputParser::finish() {
  ChatOutputDelta out;
  parse(out, true);
  return out;
}

void ChatOutputParser::parse(ChatOutputDelta& out, bool at_end) {
  while (true) {
    if (state_ == State::undecided) {
      // Reasoning only where the output opens with <think> (leading whitespace aside).
      const size_t start = pending_.find_first_not_of(" \t\r\n");
      if (start == std::string::npos ||
          (pending_.size() - start < kThinkOpen.size() &&
           kThinkOpen.starts_with(std::string_view(pending_).substr(start)))) {
        if (!at_end) return;
        state_ = State::content;
      } else if (std::string_view(pending_).substr(start).starts_with(kThinkOpen)) {
        pending_.erase(0, start + kThinkOpen.size());
        state_ = State::reasoning;
      } else {
        state_ = State::content;
      }
    }
    const bool progressed =
        state_ == State::reasoning ? parse_reasoning(out, at_end) : parse_content(out, at_end);
    if (!progressed) return;
  }
}

// Returns true when the state changed and the rest of pending_ needs another look.
bool ChatOutputParser::parse_reasoning(ChatOutputDelta& out, bool at_end) {
  const size_t close = pending_.find(kThinkClose);
  if (close != std::string::npos) {
    out.reasoning += pending_.substr(0, close);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::content;
    return true;
  }
  const size_t held = at_end ? 0 : partial_tag_suffix(pending_, kThinkClose);
  out.reasoning += pending_.substr(0, pending_.size() - held);
  pending_.erase(0, pending_.size() - held);
  return false;
}

bool ChatOutputParser::parse_content(ChatOutputDelta& out, bool at_end) {
  if (!options_.parse_tool_calls) {
    out.content += pending_;
    pending_.clear();
    return false;
  }
  if (after_call_) {  // whitespace between and after blocks is the format's, not content
    const size_t next = pending_.find_first_not_of(" \t\r\n");
    pending_.erase(0, next == std::string::npos ? pending_.size() : next);
    if (pending_.empty()) return false;
    after_call_ = false;
  }
  const size_t open = pending_.find(kCallOpen);
  if (open == std::string::npos) {
    const size_t held = at_end ? 0 : partial_tag_suffix(pending_, kCallOpen);
    out.content += pending_.substr(0, pending_.size() - held);
    pending_.erase(0, pending_.size() - held);
    return false;
  }
  out.content += pending_.substr(0, open);
  pending_.erase(0, open);
  const size_t close = pending_.find(kCallClose);
  if (close == std::string::npos) {
    if (at_end) {  // never closed: the text as it came
      out.content += pending_;
      pending_.clear();
    }
    return false;
  }
  const std::string block = pending_.substr(0, close + kCallClose.size());
  pending_.erase(0, block.size());
  ParsedToolCall call;
  if (read_tool_call(std::string_view(block).substr(kCallOpen.size(), close - kCallOpen.size()),
                     call)) {
    call.id = new_call_id();
    out.tool_calls.push_back(std::move(call));
    after_call_ = true;
  } else {
    out.content += block;
  }
  return true;
}

}  // namespace oscar
