// Unit tests of the chat templates: exact prompt strings for each kind, role errors, detection
// from the real tokenizer_config.json files and the stop ids. (chat_template_jinja_test checks the
// same strings against the Jinja templates rendered by Python.)
#include "engine/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tokenizer_test_support.h"

namespace gpufrac::engine {
namespace {

using Messages = std::vector<ChatMessage>;

TEST(ChatTemplate, Qwen3SystemUserAndGenerationPrompt) {
  const Messages m = {{"system", "You are terse."}, {"user", "hi"}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kQwen3, m),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kQwen3, m, {.enable_thinking = false}),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kQwen3, m, {.add_generation_prompt = false}),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3DropsThinkingFromEarlierAssistantTurns) {
  const Messages m = {{"user", "q1"},
                      {"assistant", "<think>\nreasoning one\n</think>\n\nanswer one"},
                      {"user", "q2"}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kQwen3, m),
            "<|im_start|>user\nq1<|im_end|>\n"
            "<|im_start|>assistant\nanswer one<|im_end|>\n"
            "<|im_start|>user\nq2<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen3KeepsThinkingAfterTheLastUserTurn) {
  const Messages m = {
      {"user", "q"}, {"assistant", "<think>\nstep\n</think>\n\npartial"}, {"assistant", "plain"}};
  // The first assistant turn has reasoning: kept; the last one always gets a think block.
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kQwen3, m, {.add_generation_prompt = false}),
            "<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nstep\n</think>\n\npartial<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nplain<|im_end|>\n");
}

TEST(ChatTemplate, Qwen3LaterSystemMessageIsAnOrdinaryTurn) {
  const Messages m = {{"user", "a"}, {"system", "b"}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kQwen3, m, {.add_generation_prompt = false}),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n");
}

TEST(ChatTemplate, ChatMl) {
  const Messages m = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", "u2"}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kChatMl, m),
            "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n"
            "<|im_start|>assistant\na<|im_end|>\n<|im_start|>user\nu2<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3StripsContent) {
  const Messages m = {{"system", " be brief\n"}, {"user", "\thello  "}};
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kLlama3, m),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nbe brief<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RefusesUnknownRolesAndEmptyLists) {
  const Messages m = {{"user", "x"}, {"tool", "y"}};
  try {
    apply_chat_template(ChatTemplateKind::kQwen3, m);
    ADD_FAILURE() << "accepted role tool";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("messages[1].role"), std::string::npos) << e.what();
  }
  EXPECT_THROW(apply_chat_template(ChatTemplateKind::kLlama3, Messages{}), std::invalid_argument);
}

TEST(ChatTemplate, NamesAndDetection) {
  for (auto k : {ChatTemplateKind::kQwen3, ChatTemplateKind::kChatMl, ChatTemplateKind::kLlama3}) {
    EXPECT_EQ(chat_template_from_name(chat_template_name(k)), k);
  }
  EXPECT_FALSE(chat_template_from_name("mistral"));
  EXPECT_EQ(detect_chat_template("{{ '<|im_start|>' + role }}"), ChatTemplateKind::kChatMl);
  EXPECT_FALSE(detect_chat_template("[INST] {{ content }} [/INST]"));
  EXPECT_EQ(read_chat_template_kind(test_util::npm_package_dir("tokenizer-qwen3") + "/models"),
            ChatTemplateKind::kQwen3);
  EXPECT_EQ(read_chat_template_kind(test_util::npm_package_dir("tokenizer-llama3") + "/models"),
            ChatTemplateKind::kLlama3);
  EXPECT_FALSE(read_chat_template_kind("/nonexistent"));
}

TEST(ChatTemplate, StopTokenIds) {
  EXPECT_EQ(chat_stop_token_ids(ChatTemplateKind::kQwen3, test_util::qwen3()),
            (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(chat_stop_token_ids(ChatTemplateKind::kLlama3, test_util::llama3()),
            (std::vector<int32_t>{128009, 128001}));
}

TEST(ChatTemplate, PromptEncodesMarkersAsSpecialIds) {
  const Tokenizer& t = test_util::qwen3();
  const std::string prompt =
      apply_chat_template(ChatTemplateKind::kQwen3, Messages{{"user", "hi"}});
  EXPECT_EQ(t.encode(prompt),
            (std::vector<int32_t>{151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198}));
}

}  // namespace
}  // namespace gpufrac::engine
