#include "server/chat_request.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/request_fields.h"
#include "util/error.h"

namespace oscar {
namespace {

using nlohmann::ordered_json;

// A string, null (empty), or a list of {"type": "text", "text": ...} parts, joined.
std::string content_text(const ordered_json& message, const std::string& where) {
  const ordered_json* content = field(message, "content");
  if (content == nullptr) return {};
  if (content->is_string()) return content->get<std::string>();
  if (content->is_array()) {
    std::string text;
    for (const ordered_json& part : *content) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        throw invalid_request(fmt::format("{}.content: only text parts are supported", where),
                              "messages");
      }
      text += part["text"].get<std::string>();
    }
    return text;
  }
  throw invalid_request(fmt::format("{}.content must be a string or a list of text parts", where),
                        "messages");
}

// OpenAI's tool_calls, with each function's arguments as a JSON object (the templates write
// them with tojson or walk their items; clients send them as JSON text).
ordered_json tool_calls_of(const ordered_json& calls, const std::string& where) {
  if (!calls.is_array())
    throw invalid_request(fmt::format("{}.tool_calls must be a list", where), "messages");
  ordered_json out = ordered_json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string at = fmt::format("{}.tool_calls[{}]", where, j);
    const ordered_json& call = calls[j];
    const ordered_json* function = call.is_object() ? field(call, "function") : nullptr;
    if (function == nullptr || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string()) {
      throw invalid_request(fmt::format("{} needs a function with a string 'name'", at),
                            "messages");
    }
    ordered_json arguments = ordered_json::object();
    if (const ordered_json* given = field(*function, "arguments")) {
      arguments = given->is_string()
                      ? ordered_json::parse(given->get<std::string>(), nullptr, false)
                      : *given;
      if (!arguments.is_object()) {
        throw invalid_request(
            fmt::format("{}.function.arguments must be a JSON object (or its text)", at),
            "messages");
      }
    }
    ordered_json normalized = {
        {"id", call.value("id", fmt::format("call_{}", j))},
        {"type", "function"},
        {"function", {{"name", (*function)["name"]}, {"arguments", std::move(arguments)}}}};
    out.push_back(std::move(normalized));
  }
  return out;
}

ordered_json chat_messages(const ordered_json& body) {
  const ordered_json* messages = field(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    throw invalid_request("'messages' must be a non-empty list", "messages");
  }
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string where = fmt::format("messages[{}]", i);
    const ordered_json& message = (*messages)[i];
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      throw invalid_request(fmt::format("{} needs a string 'role'", where), "messages");
    }
    std::string role = message["role"];
    if (role == "developer") role = "system";  // OpenAI's newer name for the system message
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      throw invalid_request(
          fmt::format("{}.role '{}' is not supported (system, developer, user, assistant, tool)",
                      where, role),
          "messages");
    }
    ordered_json normalized = {{"role", role}, {"content", content_text(message, where)}};
    if (const ordered_json* reasoning = field(message, "reasoning_content")) {
      if (!reasoning->is_string())
        throw invalid_request(where + ".reasoning_content must be a string", "messages");
      normalized["reasoning_content"] = *reasoning;
    }
    if (const ordered_json* calls = field(message, "tool_calls")) {
      if (role != "assistant")
        throw invalid_request(where + ": only assistant messages have tool_calls", "messages");
      if (!calls->empty()) normalized["tool_calls"] = tool_calls_of(*calls, where);
    }
    for (const char* key : {"tool_call_id", "name"}) {
      if (const ordered_json* value = field(message, key)) {
        if (!value->is_string())
          throw invalid_request(fmt::format("{}.{} must be a string", where, key), "messages");
        normalized[key] = *value;
      }
    }
    out.push_back(std::move(normalized));
  }
  return out;
}

ordered_json chat_tools(const ordered_json& body) {
  const ordered_json* tools = field(body, "tools");
  if (tools == nullptr) return ordered_json::array();
  if (!tools->is_array()) throw invalid_request("'tools' must be a list of functions", "tools");
  for (size_t i = 0; i < tools->size(); ++i) {
    const ordered_json& tool = (*tools)[i];
    const ordered_json* function = tool.is_object() ? field(tool, "function") : nullptr;
    if (!tool.is_object() || tool.value("type", "") != "function" || function == nullptr ||
        !function->is_object() || !function->contains("name") || !(*function)["name"].is_string()) {
      throw invalid_request(
          fmt::format(
              "tools[{}] must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}", i),
          "tools");
    }
    if (const ordered_json* parameters = field(*function, "parameters");
        parameters && !parameters->is_object()) {
      throw invalid_request(
          fmt::format("tools[{}].function.parameters must be a JSON schema object", i), "tools");
    }
  }
  return *tools;
}

// tool_choice: "none", "auto", or {"type": "function", "function": {"name": ...}}, which leaves
// only that function in the tools. Returns whether the answer is read for tool calls.
bool apply_tool_choice(const ordered_json& body, ordered_json& tools) {
  const ordered_json* choice = field(body, "tool_choice");
  if (choice == nullptr) return !tools.empty();
  if (choice->is_string() && (*choice == "none" || *choice == "auto")) {
    if (*choice == "auto" && tools.empty())
      throw invalid_request("tool_choice 'auto' needs 'tools'", "tool_choice");
    return *choice == "auto";
  }
  if (choice->is_string() && *choice == "required") {
    throw invalid_request("tool_choice 'required' is not supported (use 'auto' or name a function)",
                          "tool_choice");
  }
  const ordered_json* function = choice->is_object() ? field(*choice, "function") : nullptr;
  if (function == nullptr || !function->is_object() || !function->contains("name") ||
      !(*function)["name"].is_string()) {
    throw invalid_request(
        "'tool_choice' must be \"none\", \"auto\" or {\"type\": \"function\", \"function\": "
        "{\"name\": ...}}",
        "tool_choice");
  }
  ordered_json chosen = ordered_json::array();
  for (const ordered_json& tool : tools) {
    if (tool["function"]["name"] == (*function)["name"]) chosen.push_back(tool);
  }
  if (chosen.empty()) {
    throw invalid_request(fmt::format("tool_choice names '{}', which is not among the tools",
                                      (*function)["name"].get<std::string>()),
                          "tool_choice");
  }
  tools = std::move(chosen);
  return true;
}

// Whether `value` nests lists and objects deeper than `limit` (bounded recursion).
bool nests_deeper_than(const ordered_json& value, int limit) {
  if (!value.is_structured()) return false;
  if (limit == 0) return true;
  for (const ordered_json& item : value) {
    if (nests_deeper_than(item, limit - 1)) return true;
  }
  return false;
}

// Whether the prompt leaves a <think> block open (thinking templates open it for the model).
bool ends_inside_think_block(const std::string& prompt) {
  const size_t open = prompt.rfind("<think>");
  const size_t close = prompt.rfind("</think>");
  return open != std::string::npos && (close == std::string::npos || close < open);
}

}  // namespace

ChatPrompt render_chat_prompt(const ordered_json& body, const ChatTemplate& chat_template,
                              bool split_reasoning, const Tokenizer& tokenizer) {
  for (const char* key : {"messages", "tools", "chat_template_kwargs"}) {
    if (const ordered_json* value = field(body, key);
        value != nullptr && nests_deeper_than(*value, 64)) {
      throw invalid_request(fmt::format("'{}' nests lists and objects deeper than 64 levels", key),
                            key);
    }
  }
  if (field(body, "chat_template") != nullptr) {
    throw invalid_request(
        "a request may not carry its own 'chat_template'; start the server with --chat-template",
        "chat_template");
  }
  ChatRenderOptions options;
  options.tools = chat_tools(body);
  const bool parse_tool_calls = apply_tool_choice(body, options.tools);
  if (!options.tools.empty() && !chat_template.writes_special_tokens()) {
    throw invalid_request(
        "this model has no chat template to describe 'tools' (serve it with --chat-template)",
        "tools");
  }
  if (const ordered_json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      throw invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    options.template_kwargs = *kwargs;
  }
  options.continue_final_message = boolean(body, "continue_final_message", false);
  options.add_generation_prompt =
      boolean(body, "add_generation_prompt", !options.continue_final_message);
  if (options.continue_final_message && options.add_generation_prompt) {
    throw invalid_request(
        "'continue_final_message' and 'add_generation_prompt' cannot both be true",
        "continue_final_message");
  }
  const ordered_json messages = chat_messages(body);
  ChatPrompt prompt;
  try {
    prompt.text = chat_template.render(messages, options);
  } catch (const Error& error) {
    throw invalid_request(fmt::format("the chat template ({}) refused the messages: {}",
                                      chat_template.description(), error.what()),
                          "messages");
  }
  try {
    prompt.tokens = tokenizer.encode(prompt.text,
                                     /*add_special_tokens=*/!chat_template.writes_special_tokens());
  } catch (const Error& error) {
    throw invalid_request(fmt::format("'messages': {}", error.what()), "messages");
  }
  prompt.output.split_reasoning = split_reasoning;
  prompt.output.starts_in_reasoning = split_reasoning && ends_inside_think_block(prompt.text);
  prompt.output.parse_tool_calls = parse_tool_calls;
  return prompt;
}

}  // namespace oscar
