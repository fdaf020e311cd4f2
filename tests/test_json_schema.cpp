// JSON Schema -> grammar: documents valid against each schema are sentences
// of its grammar, invalid ones are not; unsupported keywords are refused by
// name and place.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "util/error.h"

namespace nexus::grammar {
namespace {

using ojson = nlohmann::ordered_json;

struct Case {
  const char* schema;
  std::vector<const char*> valid, invalid;
};

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& doc) {
  Matcher m(g, std::make_shared<VocabTrie>(std::vector<std::string>{"x"}));
  return m.accept(doc) && m.can_end();
}

TEST(JsonSchema, ValidDocumentsAreSentencesAndInvalidOnesAreNot) {
  const std::vector<Case> cases = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]})",
       {R"({"name": "Ann", "age": 31})", R"({"name":"","age":-2})", "{\n  \"name\": \"B\",\n  \"age\": 0\n}"},
       {R"({"age": 31, "name": "Ann"})", R"({"name": "Ann"})", R"({"name": "Ann", "age": 3.5})",
        R"({"name": "Ann", "age": 31, "x": 1})", R"({"name": 5, "age": 1})"}},
      {R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},"required":["b"]})",
       {R"({"b": null})", R"({"a": true, "b": null})", R"({"b": null, "c": 1e3})", R"({"a": false, "b": null, "c": -0.5})"},
       {R"({})", R"({"a": true})", R"({"c": 1, "b": null})", R"({"a": true, , "b": null})", R"({, "b": null})"}},
      {R"({"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}}})",
       {R"({})", R"({"x": 1})", R"({"y": 2})", R"({"x": 1, "y": 2})"},
       {R"({"y": 2, "x": 1})", R"({"x": 1,})", R"({,})"}},
      {R"({"enum":["red","green",3,null]})", {R"("red")", R"(3)", R"(null)"}, {R"("blue")", R"("Red")", R"(4)"}},
      {R"({"const":{"k":[1,2]}})", {R"({"k":[1,2]})"}, {R"({"k": [1, 2]})", R"({"k":[2,1]})"}},
      {R"({"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3})",
       {R"(["a"])", R"(["a", "b", "c"])"}, {R"([])", R"(["a","b","c","d"])", R"([1])"}},
      {R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false})",
       {R"([])", R"([1])", R"([1, "a"])"}, {R"([1, "a", 2])", R"(["a"])"}},
      {R"({"anyOf":[{"type":"string","maxLength":2},{"type":"integer"}]})",
       {R"("ab")", R"("")", R"(12)"}, {R"("abc")", R"(true)"}},
      {R"({"type":["string","null"]})", {R"("x")", R"(null)"}, {R"(1)"}},
      {R"({"type":"string","format":"date-time"})",
       {R"("2026-12-03T20:05:00Z")", R"("2026-01-31T23:59:59.123+01:00")"},
       {R"("2026-13-03T20:05:00Z")", R"("2026-12-03 20:05:00Z")", R"("2026-12-03")"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"})",
       {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": null}})"},
       {R"({"v": 1, "next": {"v": 2}})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {R"({})", R"({"any": 1, "other": 2})"}, {R"({"any": "x"})"}},
      {R"({"title":"T","description":"anything"})", {R"({"a": [1, {"b": null}]})", R"("s")"}, {R"({a: 1})"}},
  };
  for (const Case& c : cases) {
    const ojson schema = ojson::parse(c.schema);
    const auto g = std::make_shared<const Grammar>(compile_json_schema(schema));
    for (const char* doc : c.valid) EXPECT_TRUE(accepts(g, doc)) << c.schema << "\n  should accept " << doc;
    for (const char* doc : c.invalid) EXPECT_FALSE(accepts(g, doc)) << c.schema << "\n  should reject " << doc;
  }
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedByNameAndPlace) {
  auto message = [](const char* schema) {
    try {
      compile_json_schema(ojson::parse(schema));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"({"type":"object","properties":{"age":{"type":"integer","minimum":0}}})"),
            "#/properties/age: 'minimum' is not supported here");
  EXPECT_NE(message(R"({"type":"string","pattern":"^a+$"})").find("'pattern'"), std::string::npos);
  EXPECT_NE(message(R"({"allOf":[{"type":"string"}]})").find("'allOf'"), std::string::npos);
  EXPECT_NE(message(R"({"type":"string","format":"email"})").find("'email'"), std::string::npos);
  EXPECT_NE(message(R"({"$ref":"https://example.com/s.json"})").find("$ref"), std::string::npos);
  EXPECT_NE(message(R"({"type":"wizard"})").find("'wizard'"), std::string::npos);
  EXPECT_NE(message(R"({"type":"object","properties":{"a":{}},"additionalProperties":true})").find("additionalProperties"),
            std::string::npos);
  EXPECT_NE(message(R"({"type":"array","maxItems":5000})").find("maxItems"), std::string::npos);
  EXPECT_NE(message(R"({"type":"object","properties":{},"required":["ghost"]})").find("ghost"), std::string::npos);
  EXPECT_NE(message(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(message(R"(false)").find("matches nothing"), std::string::npos);
}

// Found by fuzz_json_schema: the grammar let a number overflow a double
// (8e721: nlohmann refuses the document, JavaScript reads Infinity); and a
// schema nested thousands of levels deep (75 KB of `items`, a chain of
// $refs, a deep `const`) overflowed the stack of `nexus serve`.
TEST(JsonSchema, NumbersStayWithinADoublesRange) {
  const auto g = std::make_shared<const Grammar>(compile_json_schema(ojson::parse(R"({"type":"number"})")));
  for (const char* ok : {"1e99", "-9999999999999999.5E+99", "1e-999", "0.25e-5"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"8e721", "1e100", "1e+308", "1e-1000"}) EXPECT_FALSE(accepts(g, bad)) << bad;
  EXPECT_TRUE(accepts(g, "0.1234567890123456"));
  EXPECT_FALSE(accepts(g, "0.12345678901234567"));
}

TEST(JsonSchema, DeepSchemasAreRefusedNotRecursedInto) {
  auto refused = [](const std::string& schema) {
    try {
      compile_json_schema(ojson::parse(schema));
    } catch (const Error& e) {
      return std::string(e.what()).find("deeper than 128") != std::string::npos;
    }
    return false;
  };
  std::string items, consts = "{\"const\":", refs = "{\"$defs\":{";
  for (int i = 0; i < 20000; ++i) items += "{\"type\":\"array\",\"items\":";
  items += "{}" + std::string(20000, '}');
  consts += std::string(100000, '[') + std::string(100000, ']') + "}";
  for (int i = 0; i < 1000; ++i) refs += "\"a" + std::to_string(i) + "\":{\"$ref\":\"#/$defs/a" + std::to_string(i + 1) + "\"},";
  refs += "\"a1000\":{}},\"$ref\":\"#/$defs/a0\"}";
  EXPECT_TRUE(refused(items));
  EXPECT_TRUE(refused(consts));
  EXPECT_TRUE(refused(refs));
  // 100 levels are fine.
  std::string ok;
  for (int i = 0; i < 100; ++i) ok += "{\"type\":\"array\",\"items\":";
  ok += "{}" + std::string(100, '}');
  EXPECT_NO_THROW(compile_json_schema(ojson::parse(ok)));
}

// The SDKs parse streamed structured output after every delta, and
// openai-node's partial parser throws on whitespace-only text: the value
// comes first (trailing whitespace stays allowed).
TEST(JsonSchema, NoWhitespaceBeforeTheValue) {
  const auto g = std::make_shared<const Grammar>(compile_json_schema(ojson::parse(R"({"type":"object"})")));
  EXPECT_TRUE(accepts(g, "{} "));
  EXPECT_FALSE(accepts(g, " {}"));
  EXPECT_FALSE(accepts(g, "\n{}"));
}

}  // namespace
}  // namespace nexus::grammar
