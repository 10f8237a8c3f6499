// The router's "model" scanner agrees with a full JSON parser on valid bodies (any key order,
// nested "model" keys that must not count, escapes), and refuses what is not an object.
#include "node/request_model.h"

#include <gtest/gtest.h>

#include <random>

#include "common/json.h"

namespace gpufrac {
namespace {

std::string model_of(const std::string& body) {
  RequestModelError error = RequestModelError::kNone;
  auto found = find_request_model(body, &error);
  return found ? found->name : "<error " + std::to_string(int(error)) + ">";
}

TEST(RequestModel, FindsTheTopLevelModel) {
  EXPECT_EQ(model_of(R"({"model":"a","prompt":[1,2,3]})"), "a");
  EXPECT_EQ(model_of(R"(  {"prompt":[1,[2,{"model":"inner"}]],"x":{"model":"n"},"model" : "b" } )"), "b");
  EXPECT_EQ(model_of(R"({"messages":[{"role":"user","content":"say \"model\": \"x\" }]"}],"model":"c"})"), "c");
  EXPECT_EQ(model_of(R"({"max_tokens":16,"stream":true,"t":null,"f":-1.5e3,"model":"org/m:1"})"), "org/m:1");
  EXPECT_EQ(model_of(R"({"model":"caf\u00e9 \ud83d\ude00 \\ \" \/"})"), "caf\xc3\xa9 \xf0\x9f\x98\x80 \\ \" /");
  EXPECT_EQ(model_of(R"({"mod\u0065l":"escaped-key"})"), "escaped-key");
}

TEST(RequestModel, RefusesWhatIsNotAnObjectWithAModelString) {
  EXPECT_EQ(model_of("not json"), "<error 1>");
  EXPECT_EQ(model_of("[1,2]"), "<error 1>");
  EXPECT_EQ(model_of(""), "<error 1>");
  EXPECT_EQ(model_of("{}"), "<error 2>");
  EXPECT_EQ(model_of(R"({"prompt":"x"})"), "<error 2>");
  EXPECT_EQ(model_of(R"({"model":7})"), "<error 3>");
  EXPECT_EQ(model_of(R"({"model":null})"), "<error 3>");
  EXPECT_EQ(model_of(R"({"prompt":"unterminated)"), "<error 1>");
  EXPECT_EQ(model_of(R"({"model":"unterminated)"), "<error 1>");
  EXPECT_EQ(model_of(R"({"a" 1,"model":"x"})"), "<error 1>");
  EXPECT_EQ(model_of(R"({"model":"bad \q escape"})"), "<error 1>");
}

TEST(RequestModel, AgreesWithAFullParserOnRandomBodies) {
  std::mt19937 rng(11);
  const std::vector<std::string> names = {"m", "qwen3-4b", "Qwen/Qwen3-4B", "caf\xc3\xa9", "q\"uote", "back\\slash", "tab\t"};
  for (int trial = 0; trial < 2000; ++trial) {
    Json body = Json::object();
    std::string name = names[rng() % names.size()];
    body["model"] = name;
    body["prompt"] = Json::array();
    for (int i = 0, n = int(rng() % 50); i < n; ++i) body["prompt"].push_back(int(rng() % 151643));
    if (rng() % 2) body["messages"] = {{{"role", "user"}, {"content", "the \"model\": \"no\" {[}]"}}};
    if (rng() % 2) body["stream_options"] = {{"include_usage", true}, {"model", "nested"}};
    body["max_tokens"] = int(rng() % 1000);
    std::string text = body.dump(rng() % 2 ? -1 : 2);
    auto found = find_request_model(text, nullptr);
    ASSERT_TRUE(found) << text;
    EXPECT_EQ(found->name, name) << text;
    // Replacing the value gives the same document with only the model changed.
    Json replaced = Json::parse(replace_request_model(text, *found, "renamed"));
    body["model"] = "renamed";
    EXPECT_EQ(replaced, body);
  }
}

}  // namespace
}  // namespace gpufrac
