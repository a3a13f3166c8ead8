#include "tokenizer/chat_template.h"

#include <filesystem>
#include <vector>

#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

using nlohmann::ordered_json;

// A special token in tokenizer_config.json: a string, or {"content": ...}.
std::string token_text(const ordered_json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"];
  return {};
}

ordered_json read_tokenizer_config(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) return ordered_json::object();
  try {
    return ordered_json::parse(read_file(path.string()));
  } catch (const ordered_json::exception& error) {
    fail("{}: {}", path.string(), error.what());
  }
}

std::shared_ptr<const jinja::Template> compile(std::string_view source,
                                               const std::string& source_name) {
  try {
    return std::make_shared<const jinja::Template>(source);
  } catch (const Error& error) {
    fail("{}: {}", source_name, error.what());
  }
}

bool mentions_think(std::string_view source) {
  return source.find("<think>") != std::string_view::npos;
}

// transformers' continue_final_message: the rendering cut after the final message's content
// (or after that content trimmed, for templates that trim it).
std::string cut_after_final_message(const std::string& rendered, const ordered_json& messages) {
  const ordered_json& final_message = messages.back();
  require(final_message.contains("content") && final_message["content"].is_string(),
          "continue_final_message: the final message has no text content");
  std::string content = final_message["content"];
  size_t at = rendered.rfind(content);
  if (at == std::string::npos) {
    const size_t begin = content.find_first_not_of(" \t\n\r\f\v");
    const size_t end = content.find_last_not_of(" \t\n\r\f\v");
    content = begin == std::string::npos ? std::string() : content.substr(begin, end - begin + 1);
    at = rendered.rfind(content);
  }
  require(at != std::string::npos,
          "continue_final_message: the template does not write the final message's content");
  return rendered.substr(0, at + content.size());
}

std::string render_builtin(ChatFormat format, const ordered_json& messages,
                           const ChatRenderOptions& options) {
  require(options.tools.is_null() || options.tools.empty(),
          "this model has no chat template, and the built-in layout cannot describe tools");
  std::vector<ChatMessage> chat;
  for (const auto& message : messages) {
    const auto content = message.find("content");
    chat.push_back({message.value("role", ""), content != message.end() && content->is_string()
                                                   ? content->get<std::string>()
                                                   : std::string()});
  }
  return format_chat(chat, format, options.add_generation_prompt);
}

}  // namespace

ChatTemplate ChatTemplate::builtin(ChatFormat format) {
  ChatTemplate chat;
  chat.builtin_format_ = format;
  chat.source_name_ = format == ChatFormat::chatml   ? "built-in ChatML"
                      : format == ChatFormat::llama3 ? "built-in Llama 3"
                                                     : "built-in Mistral";
  return chat;
}

ChatTemplate ChatTemplate::from_source(std::string_view source, std::string bos_token,
                                       std::string eos_token) {
  ChatTemplate chat;
  chat.source_name_ = "chat template";
  chat.default_ = compile(source, chat.source_name_);
  chat.writes_think_blocks_ = mentions_think(source);
  chat.bos_token_ = std::move(bos_token);
  chat.eos_token_ = std::move(eos_token);
  return chat;
}

ChatTemplate ChatTemplate::load_file(const std::string& path, const std::string& model_dir) {
  const ordered_json config = read_tokenizer_config(model_dir);
  ChatTemplate chat;
  chat.source_name_ = path;
  const std::string source = read_file(path);
  chat.default_ = compile(source, path);
  chat.writes_think_blocks_ = mentions_think(source);
  chat.bos_token_ = token_text(config, "bos_token");
  chat.eos_token_ = token_text(config, "eos_token");
  return chat;
}

ChatTemplate ChatTemplate::load(const std::string& model_dir, std::string_view architecture_name) {
  const std::filesystem::path jinja_file = std::filesystem::path(model_dir) / "chat_template.jinja";
  if (std::filesystem::exists(jinja_file)) return load_file(jinja_file.string(), model_dir);
  const ordered_json config = read_tokenizer_config(model_dir);
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return builtin(chat_format_for(architecture_name));
  const std::string source_name =
      (std::filesystem::path(model_dir) / "tokenizer_config.json").string();
  ChatTemplate chat;
  chat.source_name_ = source_name;
  chat.bos_token_ = token_text(config, "bos_token");
  chat.eos_token_ = token_text(config, "eos_token");
  if (it->is_string()) {
    chat.default_ = compile(it->get<std::string>(), source_name);
    chat.writes_think_blocks_ = mentions_think(it->get<std::string>());
    return chat;
  }
  require(it->is_array(), "{}: chat_template must be a string or a list of {{name, template}}",
          source_name);
  for (const auto& named : *it) {
    require(named.is_object() && named.contains("name") && named.contains("template") &&
                named["name"].is_string() && named["template"].is_string(),
            "{}: chat_template entries must be {{\"name\": ..., \"template\": ...}}", source_name);
    const std::string name = named["name"];
    auto compiled = compile(named["template"].get<std::string>(), source_name + " (" + name + ")");
    chat.writes_think_blocks_ |= mentions_think(named["template"].get<std::string>());
    if (name == "default") chat.default_ = std::move(compiled);
    if (name == "tool_use") chat.tool_use_ = std::move(compiled);
  }
  require(chat.default_ != nullptr, "{}: chat_template lists no template named \"default\"",
          source_name);
  return chat;
}

std::string ChatTemplate::render(const ordered_json& messages,
                                 const ChatRenderOptions& options) const {
  require(messages.is_array() && !messages.empty(), "messages must be a non-empty list");
  require(!(options.continue_final_message && options.add_generation_prompt),
          "continue_final_message and add_generation_prompt cannot both be true");
  std::string rendered;
  if (default_ == nullptr) {
    rendered = render_builtin(builtin_format_, messages, options);
  } else {
    const bool has_tools = !options.tools.is_null() && !options.tools.empty();
    ordered_json context =
        options.template_kwargs.is_object() ? options.template_kwargs : ordered_json::object();
    context["messages"] = messages;
    if (has_tools) context["tools"] = options.tools;
    context["add_generation_prompt"] = options.add_generation_prompt;
    if (!context.contains("bos_token")) context["bos_token"] = bos_token_;
    if (!context.contains("eos_token")) context["eos_token"] = eos_token_;
    const jinja::Template& chosen = has_tools && tool_use_ != nullptr ? *tool_use_ : *default_;
    rendered = chosen.render(context);
  }
  return options.continue_final_message ? cut_after_final_message(rendered, messages) : rendered;
}

std::string ChatTemplate::description() const {
  return source_name_;
}

}  // namespace oscar
