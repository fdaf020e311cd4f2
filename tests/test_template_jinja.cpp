// Unit tests of the Jinja interpreter (src/template/jinja.h): each construct,
// the error cases (unknown names are named), the sandbox limits, and hostile
// random templates (never a crash, a hang or a leak: only output or a
// TemplateError).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "template/jinja.h"

using nexus::tmpl::RenderLimits;
using nexus::tmpl::RenderOptions;
using nexus::tmpl::Template;
using nexus::tmpl::TemplateError;
using ojson = nlohmann::ordered_json;

namespace {

std::string render(const std::string& src, const ojson& ctx = ojson::object(), const RenderOptions& o = {}) {
  return Template(src).render(ctx, o);
}

// The error of rendering (or parsing) `src`; "" when it rendered.
std::string error_of(const std::string& src, TemplateError::Kind* kind = nullptr, const RenderOptions& o = {}) {
  try {
    (void)render(src, ojson::object(), o);
  } catch (const TemplateError& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Jinja, TextExpressionsAndLiterals) {
  EXPECT_EQ(render("hello"), "hello");
  EXPECT_EQ(render("a\n"), "a");  // one trailing newline dropped, as the reference does
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}|{{ 1 / 2 }}|{{ 3.0 }}"),
            "7|3|-4|1|1024|0.5|3.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ true }}|{{ 'x' + 'y' }}|{{ \"q\\\"\\n\" }}|{{ 'ab' 'cd' }}"), "a1true|xy|q\"\n|abcd");
  EXPECT_EQ(render("{{ [1, 'a', none] }}|{{ {'k': [1, 2]} }}|{{ (1, 2) }}|{{ none }}{{ undefined_name }}"),
            "[1, \"a\", null]|{\"k\": [1, 2]}|[1, 2]|");
  EXPECT_EQ(render("{{ true and 0 }}|{{ '' or 'b' }}|{{ not [] }}|{{ 1 < 2 }}|{{ 'b' in 'abc' }}|{{ 3 not in [1] }}"),
            "0|b|true|true|true|true");
  EXPECT_EQ(render("{{ 'yes' if x else 'no' }}|{{ 'v' if true }}|{{ 'v' if false }}|", {{"x", 1}}), "yes|v||");
}

TEST(Jinja, MembersSubscriptsAndSlices) {
  const ojson ctx = {{"m", {{"role", "user"}, {"list", {1, 2, 3, 4}}}}, {"s", "héllo"}};
  EXPECT_EQ(render("{{ m.role }}{{ m['role'] }}{{ m.list[-1] }}{{ m.list.0 }}{{ m.missing }}", ctx), "useruser41");
  EXPECT_EQ(render("{{ m.list[1:3] }}{{ m.list[::-1] }}{{ m.list[:-2] }}{{ s[1] }}{{ s[1:3] }}{{ s[::-1] }}", ctx),
            "[2, 3][4, 3, 2, 1][1, 2]éélolléh");
  EXPECT_EQ(render("{{ s.length }}{{ m.list.length }}{{ s | length }}", ctx), "545");
}

TEST(Jinja, StatementsAndWhitespaceControl) {
  EXPECT_EQ(render("{% if x %}a{% elif y %}b{% else %}c{% endif %}", {{"y", true}}), "b");
  EXPECT_EQ(render("{% for i in [1,2,3] %}{{ loop.index }}{{ i }}{% if not loop.last %},{% endif %}{% endfor %}"),
            "11,22,33");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in range(10) if i is odd %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "135");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 2 %}{% continue %}{% endif %}{{ i }}{% endfor %}"), "0134");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}"), "ab");
  EXPECT_EQ(render("{{ loop.previtem }}{% for i in 'ab' %}{{ loop.previtem }}{{ i }}{{ loop.revindex0 }}{% endfor %}"),
            "a1ab0");
  // set inside a loop does not leak out; a namespace does.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t %}in {{ 1 + 1 }}{% endset %}[{{ t }}]"), "[in 2]");
  EXPECT_EQ(render("{% filter upper %}shout{% endfilter %}"), "SHOUT");
  // trim_blocks + lstrip_blocks, and the `-` markers.
  EXPECT_EQ(render("  {% if true %}\nyes\n  {% endif %}\nend"), "yes\nend");
  EXPECT_EQ(render("a   {{- 'b' -}}   c {#- comment -#} d"), "abcd");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bob', punct='?') }} {{ greet(*['Cy']) }}"),
            "Hi Ann! Hi Bob? Hi Cy!");
  EXPECT_EQ(render("{% macro m() %}{{ varargs | length }}{{ kwargs.k }}{% endmacro %}{{ m(1, 2, k='v') }}"), "2v");
  EXPECT_EQ(render("{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}body{% endcall %}"), "[body]");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
}

TEST(Jinja, Filters) {
  const ojson ctx = {{"ms", {{{"role", "system"}, {"n", 2}}, {{"role", "user"}, {"n", 1}}, {{"role", "user"}, {"n", 3}}}}};
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'hi there' | title }}|"
                   "{{ 'hi' | capitalize }}|{{ [3,1,2] | sort }}|{{ [1,2] | reverse }}|{{ [1,1,2] | unique }}"),
            "x|AB|ab|Hi There|Hi|[1, 2, 3]|[2, 1]|[1, 2]");
  EXPECT_EQ(render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='n') | join(',') }}|"
                   "{{ ms | rejectattr('role', 'equalto', 'user') | length }}|{{ ms | sort(attribute='n') | first }}|"
                   "{{ (ms | last).n }}",
                   ctx),
            "1,3|1|{\"role\": \"user\", \"n\": 1}|3");
  EXPECT_EQ(render("{{ x | default('d') }}|{{ '' | default('e', true) }}|{{ '42' | int + 1 }}|{{ 'x' | int(7) }}|"
                   "{{ 2 | float }}|{{ -3 | abs }}|{{ 5 | string }}|{{ 'a\\nb' | indent(2) }}|{{ 'a b' | replace(' ', '_') }}"),
            "d|e|43|7|2.0|3|5|a\n  b|a_b");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 'é']} | tojson }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|"
                   "{{ 'é' | tojson(ensure_ascii=true) }}|{{ [1, {'k': 2}] | tojson(indent=2) }}|"
                   "{{ {'a': 1} | tojson(separators=(',', ':')) }}"),
            "{\"b\": 1, \"a\": [1, \"é\"]}|{\"a\": 2, \"b\": 1}|\"\\u00e9\"|[\n  1,\n  {\n    \"k\": 2\n  }\n]|{\"a\":1}");
  EXPECT_EQ(render("{{ {'b': 2, 'a': 1} | dictsort }}|{{ {'a': 1} | items }}"), "[[\"a\", 1], [\"b\", 2]]|[[\"a\", 1]]");
}

TEST(Jinja, TestsAndMethods) {
  EXPECT_EQ(render("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ 3 is number }}"
                   "{{ {} is mapping }}{{ [1] is iterable }}{{ 4 is even }}{{ 9 is divisibleby(3) }}{{ 1 is not string }}"),
            "falsetruetruetruetruetruetruetruetruetrue");
  EXPECT_EQ(render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\nq'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|"
                   "{{ ' a  b '.split() }}|{{ 'ab'.startswith('a') }}{{ 'ab'.endswith(('x', 'b')) }}|"
                   "{{ 'aXbX'.replace('X', '-', 1) }}|{{ {'k': 1}.get('k') }}{{ {'k': 1}.get('z', 'd') }}|"
                   "{{ {'a': 1}.keys() }}{{ {'a': 1}.values() }}|{{ '-'.join(['a', 'b']) }}|{{ 'banana'.count('an') }}"),
            "a b|a|q|[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"b\"]|truetrue|a-bX|1d|[\"a\"][1]|a-b|2");
  RenderOptions o;
  o.now = 1721995200;  // 2024-07-26 12:00 UTC
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}", ojson::object(), o), "26 Jul 2024");
}

TEST(Jinja, ErrorsNameWhatIsUnknown) {
  TemplateError::Kind k{};
  EXPECT_NE(error_of("{{ x | frobnicate }}", &k).find("unknown filter 'frobnicate'"), std::string::npos);
  EXPECT_EQ(k, TemplateError::Kind::Runtime);
  EXPECT_NE(error_of("{{ 1 is prime }}").find("unknown test 'prime'"), std::string::npos);
  EXPECT_NE(error_of("{{ launch_missiles() }}").find("unknown function 'launch_missiles'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a'.shout() }}").find("unknown method 'shout' of a string"), std::string::npos);
  EXPECT_NE(error_of("{% include 'x.j2' %}", &k).find("unknown statement 'include'"), std::string::npos);
  EXPECT_EQ(k, TemplateError::Kind::Syntax);
  EXPECT_NE(error_of("line\n{% if %}").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y %}").find("unclosed 'for'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 + none }}").find("none"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_EQ(error_of("{{ raise_exception('no system role') }}", &k), "no system role");
  EXPECT_EQ(k, TemplateError::Kind::Raised);
}

TEST(Jinja, SandboxLimitsStopRunawayTemplates) {
  TemplateError::Kind k{};
  // Nested loops that would run 10^12 times.
  EXPECT_NE(error_of("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}", &k)
                .find("loop iterations"),
            std::string::npos);
  EXPECT_EQ(k, TemplateError::Kind::Limit);
  EXPECT_NE(error_of("{% for i in range(100000000000) %}{% endfor %}", &k).find("more than"), std::string::npos);
  // Output that doubles without bound.
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
                     "{{ ns.s }}",
                     &k)
                .find("bytes"),
            std::string::npos);
  EXPECT_EQ(k, TemplateError::Kind::Limit);
  // Endless recursion, and exponential recursion within the depth limit.
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", &k).find("nesting"), std::string::npos);
  EXPECT_EQ(k, TemplateError::Kind::Limit);
  RenderOptions small;
  small.limits.max_steps = 100000;
  EXPECT_NE(error_of("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
                     &k, small)
                .find("evaluation steps"),
            std::string::npos);
  // A namespace that holds itself cannot be printed forever.
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", &k).find("nested deeper"),
            std::string::npos);
  // Parser nesting is bounded too (no stack overflow).
  EXPECT_NE(error_of(std::string("{{ ") + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", &k)
                .find("nested deeper"),
            std::string::npos);
  EXPECT_EQ(k, TemplateError::Kind::Syntax);
  RenderOptions tiny;
  tiny.limits.max_output_bytes = 10;
  EXPECT_NE(error_of("0123456789{{ 'x' }}", &k, tiny).find("exceeds 10 bytes"), std::string::npos);
  EXPECT_EQ(error_of("0123456789", &k, tiny), "");
}

TEST(Jinja, HostileRandomTemplatesNeverCrash) {
  // Random soup of template syntax, identifiers and bytes; each either
  // renders or fails with a TemplateError, within small limits.
  const std::vector<std::string> atoms = {
      "{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "*", "**", "/", "//", "%", "~", "(", ")", "[", "]", "{", "}",
      ",", ".", ":", "|", "=", "==", "!=", "<", ">", " ", "\n", "'s'", "\"t\"", "1", "2.5", "-1", "x", "ns", "loop",
      "messages", "m", "i", "for", "in", "if", "else", "elif", "endif", "endfor", "set", "macro", "endmacro", "call",
      "endcall", "filter", "endfilter", "is", "not", "and", "or", "none", "true", "range", "namespace", "tojson",
      "trim", "items", "join", "length", "caller", "raise_exception", "\\", "\x01", "\xff", "é", "'", "\""};
  std::mt19937 rng(12345);
  RenderOptions o;
  o.limits.max_steps = 20000;
  o.limits.max_loop_iterations = 2000;
  o.limits.max_output_bytes = 1 << 16;
  o.limits.max_depth = 64;
  const ojson ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"x", {1, 2}}};
  int rendered = 0, refused = 0;
  for (int n = 0; n < 3000; ++n) {
    std::string src;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) src += atoms[rng() % atoms.size()];
    try {
      (void)Template(src).render(ctx, o);
      ++rendered;
    } catch (const TemplateError&) {
      ++refused;
    }
  }
  // Also mutations of a real-looking template (closer to valid syntax).
  const std::string base =
      "{% set ns = namespace(s='') %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.s = ns.s ~ m.content | "
      "trim %}{% endif %}{{ m | tojson }}{% endfor %}{{ ns.s }}{% if add_generation_prompt %}A:{% endif %}";
  for (int n = 0; n < 3000; ++n) {
    std::string src = base;
    for (int k = 0; k < 3; ++k) {
      const size_t at = rng() % src.size();
      switch (rng() % 3) {
        case 0: src.erase(at, 1 + rng() % 4); break;
        case 1: src.insert(at, atoms[rng() % atoms.size()]); break;
        default: src[at] = static_cast<char>(rng() % 256); break;
      }
      if (src.empty()) src = "x";
    }
    try {
      (void)Template(src).render(ctx, o);
      ++rendered;
    } catch (const TemplateError&) {
      ++refused;
    }
  }
  EXPECT_GT(rendered, 100);
  EXPECT_GT(refused, 100);
}
