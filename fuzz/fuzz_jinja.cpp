// libFuzzer target: the Jinja interpreter of chat templates (src/template).
// The input is a template source; it is parsed and rendered over a small
// conversation with tight limits. Anything but output or a TemplateError
// (a crash, a sanitizer report, a hang past the limits) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "template/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(
      R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},
          {"role":"assistant","content":"","tool_calls":[{"id":"a1b2c3d4e","type":"function",
           "function":{"name":"f","arguments":{"x":1}}}]},{"role":"tool","content":"1","tool_call_id":"a1b2c3d4e"}],
          "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
          "add_generation_prompt":true,"bos_token":"<s>","eos_token":"</s>"})");
  nexus::tmpl::RenderOptions o;
  o.limits.max_steps = 200000;
  o.limits.max_loop_iterations = 20000;
  o.limits.max_output_bytes = 1 << 20;
  o.limits.max_depth = 100;
  o.now = 1721995200;
  try {
    const nexus::tmpl::Template t(std::string_view(reinterpret_cast<const char*>(data), size));
    (void)t.render(ctx, o);
  } catch (const nexus::tmpl::TemplateError&) {
  }
  return 0;
}
