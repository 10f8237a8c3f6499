#include "engine/tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/json.h"
#include "engine/tokenizer/unicode_classes.h"

namespace gpufrac::engine {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Python's str.lstrip('\n'), rstrip('\n'), strip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  const size_t i = s.find_first_not_of('\n');
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}
std::string_view rstrip_newlines(std::string_view s) {
  const size_t i = s.find_last_not_of('\n');
  return i == std::string_view::npos ? std::string_view() : s.substr(0, i + 1);
}
std::string_view strip_newlines(std::string_view s) {
  return lstrip_newlines(rstrip_newlines(s));
}

void check_roles(std::span<const ChatMessage> messages) {
  if (messages.empty()) throw std::invalid_argument("messages: at least one message is required");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      throw std::invalid_argument("messages[" + std::to_string(i) + "].role: '" + role +
                                  "' is not supported (use system, user or assistant)");
    }
  }
}

std::string render_qwen3(std::span<const ChatMessage> messages,
                         const ChatTemplateOptions& options) {
  std::string out;
  if (messages[0].role == "system") {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }
  // The last user turn that is not a tool response; assistant turns after it keep their thinking.
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    if (messages[i].role == "user" &&
        !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      const size_t close = content.rfind("</think>");
      if (close != std::string_view::npos) {
        // content.split('</think>')[-1].lstrip('\n'), and the reasoning:
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        const std::string_view before =
            rstrip_newlines(content.substr(0, content.find("</think>")));
        const size_t open = before.rfind("<think>");
        reasoning =
            lstrip_newlines(open == std::string_view::npos ? before : before.substr(open + 7));
        content = lstrip_newlines(content.substr(close + 8));
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
        out += "<think>\n";
        out += strip_newlines(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_newlines(content);
      } else {
        out += content;
      }
      out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string render_chatml(std::span<const ChatMessage> messages,
                          const ChatTemplateOptions& options) {
  std::string out;
  for (const ChatMessage& m : messages)
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(std::span<const ChatMessage> messages,
                          const ChatTemplateOptions& options) {
  std::string out = "<|begin_of_text|>";
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += python_strip(m.content);
    out += "<|eot_id|>";
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

std::string apply_chat_template(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                const ChatTemplateOptions& options) {
  check_roles(messages);
  switch (kind) {
    case ChatTemplateKind::kQwen3:
      return render_qwen3(messages, options);
    case ChatTemplateKind::kChatMl:
      return render_chatml(messages, options);
    case ChatTemplateKind::kLlama3:
      return render_llama3(messages, options);
  }
  throw std::invalid_argument("unknown chat template kind");
}

std::optional<ChatTemplateKind> detect_chat_template(std::string_view jinja_source) {
  if (jinja_source.find("<|im_start|>") != std::string_view::npos) {
    return jinja_source.find("<think>") != std::string_view::npos ? ChatTemplateKind::kQwen3
                                                                  : ChatTemplateKind::kChatMl;
  }
  if (jinja_source.find("<|start_header_id|>") != std::string_view::npos) {
    return ChatTemplateKind::kLlama3;
  }
  return std::nullopt;
}

std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name) {
  for (ChatTemplateKind k :
       {ChatTemplateKind::kQwen3, ChatTemplateKind::kChatMl, ChatTemplateKind::kLlama3}) {
    if (chat_template_name(k) == name) return k;
  }
  return std::nullopt;
}

std::string_view chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kQwen3:
      return "qwen3";
    case ChatTemplateKind::kChatMl:
      return "chatml";
    case ChatTemplateKind::kLlama3:
      return "llama3";
  }
  return "";
}

std::optional<ChatTemplateKind> read_chat_template_kind(const std::string& model_dir) {
  std::ifstream in(std::filesystem::path(model_dir) / "tokenizer_config.json");
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const Json config = Json::parse(buffer.str(), nullptr, false);
  if (config.is_discarded() || !config.contains("chat_template")) return std::nullopt;
  const Json& t = config["chat_template"];
  if (t.is_string()) return detect_chat_template(t.get<std::string>());
  // A list of named templates: use "default".
  if (t.is_array()) {
    for (const Json& named : t) {
      if (named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string()) {
        return detect_chat_template(named["template"].get<std::string>());
      }
    }
  }
  return std::nullopt;
}

std::vector<int32_t> chat_stop_token_ids(ChatTemplateKind kind, const Tokenizer& tokenizer) {
  std::vector<std::string_view> names;
  if (kind == ChatTemplateKind::kLlama3) {
    names = {"<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"};
  } else {
    names = {"<|im_end|>", "<|endoftext|>"};
  }
  std::vector<int32_t> ids;
  for (const std::string_view name : names) {
    if (const auto id = tokenizer.token_id(name)) ids.push_back(*id);
  }
  return ids;
}

}  // namespace gpufrac::engine
