// JSON Schema -> grammar: documents valid against each schema are sentences
// of its grammar, invalid ones are not; unsupported keywords are refused by
// name and place.
#include <gtest/gtest.h>


#include <nlohmann/json.hpp>
#include <random>
#include <regex>

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
  EXPECT_EQ(message(R"({"type":"object","properties":{"age":{"type":"integer","multipleOf":2}}})"),
            "#/properties/age: 'multipleOf' is not supported here");
  EXPECT_NE(message(R"x({"type":"string","pattern":"^(?=a)"})x").find("'pattern'"), std::string::npos);
  EXPECT_NE(message(R"({"allOf":[{"type":"string"}]})").find("'allOf'"), std::string::npos);
  EXPECT_NE(message(R"({"type":"string","format":"email"})").find("'email'"), std::string::npos);
  EXPECT_NE(message(R"({"$ref":"https://example.com/s.json"})").find("$ref"), std::string::npos);
  EXPECT_NE(message(R"({"type":"wizard"})").find("'wizard'"), std::string::npos);
  EXPECT_NE(message(R"({"type":"object","properties":{"a":{}},"additionalProperties":true})").find("additionalProperties"),
            std::string::npos);
  EXPECT_NE(message(R"({"type":"array","maxItems":5000})").find("maxItems"), std::string::npos);
  EXPECT_NE(message(R"({"type":"object","properties":{},"required":["ghost"]})").find("ghost"), std::string::npos);
  EXPECT_EQ(message(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"),
            "#/$defs/a: '$ref' reaches itself before any value is written (left recursion), so no document can be "
            "generated");
  const std::string mutual = message(
      R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"type":"null"}]},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})");
  EXPECT_EQ(mutual.rfind("#/$defs/", 0), 0u) << mutual;
  EXPECT_NE(mutual.find("(left recursion)"), std::string::npos) << mutual;
  EXPECT_NE(message(R"(false)").find("matches nothing"), std::string::npos);
  EXPECT_EQ(message(R"({"type":["integer","null","integer"]})"), "#: 'type' lists 'integer' twice");
  EXPECT_EQ(message(R"({"type":["integer",1]})"), "#: 'type' must be a string or a list of strings");
}

TEST(JsonSchema, ALongTypeListCostsNoMoreThanItsSevenTypes) {
  // fuzz_json_schema's finding: each listed type copied the schema, list
  // included (20,000 types: 53 s). Items are unique: a repeat is refused at
  // once, before any copy.
  std::string list = "[\"integer\"";
  for (int i = 0; i < 20000; ++i) list += ",\"null\"";
  const ojson schema = ojson::parse(R"({"type":)" + list + "]}");
  try {
    compile_json_schema(schema);
    ADD_FAILURE() << "a list of 20,001 types was compiled";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "#: 'type' lists 'null' twice");
  }
  EXPECT_NO_THROW(compile_json_schema(ojson::parse(
      R"({"type":["object","array","string","integer","number","boolean","null"]})")));
}


// ---- minimum / maximum / exclusiveMinimum / exclusiveMaximum ----

__extension__ typedef __int128 i128;

std::string dec(i128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  __extension__ unsigned __int128 m = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (m) {
    s.insert(s.begin(), char('0' + int(m % 10)));
    m /= 10;
  }
  return neg ? "-" + s : s;
}

// One grammar, many documents: matchers share an automaton.
struct Checker {
  explicit Checker(const std::string& schema)
      : automaton(std::make_shared<Automaton>(std::make_shared<const Grammar>(compile_json_schema(ojson::parse(schema))),
                                              std::make_shared<VocabTrie>(std::vector<std::string>{"x"}))) {}
  bool accepts(const std::string& doc) const {
    Matcher m(automaton);
    return m.accept(doc) && m.can_end();
  }
  std::shared_ptr<Automaton> automaton;
};

std::string compile_error(const std::string& schema) {
  try {
    compile_json_schema(ojson::parse(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

struct IntRange {
  std::string bounds;                // the keywords, JSON
  std::optional<i128> lo, hi;        // inclusive; absent: open
};

bool in(const IntRange& r, i128 v) { return (!r.lo || v >= *r.lo) && (!r.hi || v <= *r.hi); }

TEST(JsonSchemaBounds, SmallIntegerRangesAcceptExactlyTheirIntegers) {
  const std::vector<IntRange> ranges = {
      {R"("minimum":0,"maximum":0)", 0, 0},          {R"("minimum":0,"maximum":9)", 0, 9},
      {R"("minimum":1,"maximum":10)", 1, 10},        {R"("minimum":5,"maximum":123)", 5, 123},
      {R"("minimum":-7,"maximum":3)", -7, 3},        {R"("minimum":-120,"maximum":-15)", -120, -15},
      {R"("minimum":-1,"maximum":0)", -1, 0},        {R"("minimum":0,"maximum":1)", 0, 1},
      {R"("minimum":99,"maximum":1001)", 99, 1001},  {R"("minimum":-1000,"maximum":1000)", -1000, 1000},
      {R"("minimum":37)", 37, std::nullopt},         {R"("maximum":-37)", std::nullopt, -37},
      {R"("minimum":-5)", -5, std::nullopt},         {R"("maximum":12)", std::nullopt, 12},
      {R"("exclusiveMinimum":3,"exclusiveMaximum":10)", 4, 9},
      {R"("exclusiveMinimum":-3,"maximum":10,"minimum":-10)", -2, 10},
      {R"("minimum":2.5,"exclusiveMaximum":7.5)", 3, 7},
      {R"("exclusiveMinimum":2.0,"maximum":7.9)", 3, 7},
      {R"("exclusiveMaximum":0)", std::nullopt, -1},
      {R"("exclusiveMinimum":0)", 1, std::nullopt},
      {R"("minimum":5,"maximum":5)", 5, 5},
  };
  for (const IntRange& r : ranges) {
    const std::string schema = R"({"type":"integer",)" + r.bounds + "}";
    const Checker c(schema);
    const i128 from = (r.lo ? *r.lo : *r.hi - 1200) - 50, to = (r.hi ? *r.hi : *r.lo + 1200) + 50;
    for (i128 v = from; v <= to; ++v) {
      EXPECT_EQ(c.accepts(dec(v)), in(r, v)) << schema << " on " << dec(v);
      EXPECT_EQ(c.accepts(dec(v) + " "), in(r, v)) << schema << " on " << dec(v) << " with a space after";
    }
    for (const char* bad : {"-0", "00", "01", "007", "+5", "5.0", "5e0", "--5", "", "-"})
      EXPECT_FALSE(c.accepts(bad)) << schema << " on " << bad;
  }
}

TEST(JsonSchemaBounds, SixtyFourBitIntegerRangesAtTheirEdgesAndDigitCounts) {
  const i128 i64min = std::numeric_limits<int64_t>::min(), i64max = std::numeric_limits<int64_t>::max();
  const i128 u64max = std::numeric_limits<uint64_t>::max();
  const std::vector<IntRange> ranges = {
      {"\"minimum\":" + dec(i64min) + ",\"maximum\":" + dec(i64max), i64min, i64max},
      {"\"minimum\":0,\"maximum\":" + dec(u64max), 0, u64max},
      {"\"minimum\":" + dec(u64max - 1000) + ",\"maximum\":" + dec(u64max), u64max - 1000, u64max},
      {"\"minimum\":" + dec(i64min) + ",\"maximum\":" + dec(i64min + 100), i64min, i64min + 100},
      {"\"minimum\":-123456789012,\"maximum\":98765432109876", -123456789012LL, 98765432109876LL},
      {"\"minimum\":1000000007", 1000000007, std::nullopt},
      {"\"maximum\":-999999999999", std::nullopt, -999999999999LL},
      {"\"exclusiveMinimum\":" + dec(i64min) + ",\"exclusiveMaximum\":" + dec(i64max), i64min + 1, i64max - 1},
  };
  std::mt19937_64 rng(22);
  for (const IntRange& r : ranges) {
    const std::string schema = R"({"type":"integer",)" + r.bounds + "}";
    const Checker c(schema);
    std::vector<i128> probe;
    for (const auto& b : {r.lo, r.hi})
      if (b)
        for (i128 d = -3; d <= 3; ++d) probe.push_back(*b + d);
    i128 p10 = 1;  // every digit-count change, both signs
    for (int k = 0; k <= 20; ++k, p10 *= 10)
      for (i128 v : {p10 - 2, p10 - 1, p10, p10 + 1}) probe.insert(probe.end(), {v, -v});
    for (int k = 0; k < 2000; ++k) {
      const i128 lo = r.lo ? *r.lo : -u64max, hi = r.hi ? *r.hi : u64max;
      const i128 span = hi - lo + 1;
      const i128 x = (static_cast<i128>(rng()) << 64 | rng()) % span;
      probe.push_back(lo + (x < 0 ? x + span : x));
      probe.push_back(static_cast<int64_t>(rng()) >> (rng() % 64));  // any magnitude
    }
    for (i128 v : probe) EXPECT_EQ(c.accepts(dec(v)), in(r, v)) << schema << " on " << dec(v);
    EXPECT_FALSE(c.accepts("-0")) << schema;
    EXPECT_FALSE(c.accepts("0" + dec(r.lo ? *r.lo : 5))) << schema;
  }
}

TEST(JsonSchemaBounds, NumbersWithWholeBoundsAreComparedExactly) {
  struct NumRange {
    const char* bounds;
    std::optional<i128> lo, hi;  // in whole units
    bool lo_excl, hi_excl;
  };
  const std::vector<NumRange> ranges = {
      {R"("minimum":0,"maximum":5)", 0, 5, false, false},
      {R"("exclusiveMinimum":0,"exclusiveMaximum":5)", 0, 5, true, true},
      {R"("minimum":-3,"exclusiveMaximum":2)", -3, 2, false, true},
      {R"("exclusiveMinimum":-3,"maximum":-1)", -3, -1, true, false},
      {R"("minimum":-2,"maximum":-2)", -2, -2, false, false},
      {R"("minimum":0)", 0, std::nullopt, false, false},
      {R"("exclusiveMaximum":1)", std::nullopt, 1, false, true},
      {R"("minimum":4.0,"maximum":12)", 4, 12, false, false},
  };
  // Candidates: every quarter in a window, in several spellings.
  for (const NumRange& r : ranges) {
    const std::string schema = std::string(R"({"type":"number",)") + r.bounds + "}";
    const Checker c(schema);
    for (i128 q = -4 * 20; q <= 4 * 20; ++q) {  // q / 4
      const i128 m = q < 0 ? -q : q;
      const std::string sign = q < 0 ? "-" : "";
      std::vector<std::string> texts;
      const char* fracs[] = {"", ".25", ".5", ".75"};
      if (m % 4 == 0) {
        texts = {sign + dec(m / 4), sign + dec(m / 4) + ".0", sign + dec(m / 4) + ".000"};
        if (m != 0) texts.push_back(sign + dec(m / 4 - 1) + ".9999");  // a bit below/above, checked apart
      } else {
        texts = {sign + dec(m / 4) + fracs[m % 4], sign + dec(m / 4) + fracs[m % 4] + "00"};
      }
      const bool ok = (!r.lo || (r.lo_excl ? q > 4 * *r.lo : q >= 4 * *r.lo)) &&
                      (!r.hi || (r.hi_excl ? q < 4 * *r.hi : q <= 4 * *r.hi));
      for (size_t k = 0; k < texts.size(); ++k) {
        if (m % 4 == 0 && k == 3) continue;
        if (q == 0 && !sign.empty()) continue;
        EXPECT_EQ(c.accepts(texts[k]), ok) << schema << " on " << texts[k];
      }
      if (m % 4 == 0 && m != 0) {  // (m/4 - 1).9999, signed: strictly between the quarters
        const double v = (q < 0 ? -1.0 : 1.0) * (double(m / 4) - 0.0001);
        const bool in_range = (!r.lo || (r.lo_excl ? v > double(*r.lo) : v >= double(*r.lo))) &&
                              (!r.hi || (r.hi_excl ? v < double(*r.hi) : v <= double(*r.hi)));
        EXPECT_EQ(c.accepts(texts[3]), in_range) << schema << " on " << texts[3];
      }
    }
    for (const char* bad : {"-0", "-0.0", "01", "1.", ".5", "1e0"}) EXPECT_FALSE(c.accepts(bad)) << schema << " on " << bad;
  }
}

TEST(JsonSchemaBounds, BadBoundsAreRefusedByNameAndPlace) {
  EXPECT_EQ(compile_error(R"({"properties":{"n":{"type":"integer","minimum":5,"maximum":3}}})"),
            "#/properties/n: no integer satisfies 'minimum' 5 and 'maximum' 3");
  EXPECT_EQ(compile_error(R"({"properties":{"n":{"type":"integer","minimum":"5"}}})"),
            "#/properties/n: 'minimum' must be a number, not \"5\"");
  EXPECT_NE(compile_error(R"({"type":"integer","exclusiveMinimum":3,"maximum":3})").find("'exclusiveMinimum' 3"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"integer","minimum":2.2,"maximum":2.8})").find("no integer"), std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"number","minimum":1,"exclusiveMaximum":1})").find("no number"), std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"number","minimum":0.5})").find("'minimum' 0.5 on type 'number'"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"integer","maximum":1e30})").find("'maximum' 1e+30 is beyond"), std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"integer","exclusiveMaximum":true,"maximum":3})").find("draft-04"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"string","minimum":1})").find("'minimum' is not supported here"),
            std::string::npos);
  const Checker nullable(R"({"type":["integer","null"],"minimum":-1,"maximum":1})");
  for (const char* ok : {"-1", "0", "1", "null"}) EXPECT_TRUE(nullable.accepts(ok)) << ok;
  for (const char* bad : {"-2", "2", "\"1\""}) EXPECT_FALSE(nullable.accepts(bad)) << bad;
}

// ---- pattern ----

struct PatternCase {
  const char* pattern;
  std::vector<const char*> accepted, rejected;  // JSON texts
};

TEST(JsonSchemaPattern, TableOfPatternsAcceptedAndRejectedTexts) {
  const std::vector<PatternCase> cases = {
      {"^abc$", {R"("abc")"}, {R"("abcd")", R"("ab")", R"("xabc")", R"(abc)"}},
      {"abc", {R"("abc")", R"("xxabcyy")", R"("\"abc\\")"}, {R"("ab")", R"("abxc")"}},
      {"^\\d{3}-\\d{4}$", {R"("555-1234")"}, {R"("5551234")", R"("555-123")", R"("555-12345")", R"("a55-1234")"}},
      {"^[a-z]+(?:_[a-z]+)*$", {R"("snake_case_x")", R"("a")"}, {R"("Snake")", R"("a__b")", R"("a_")", R"("")"}},
      {"^(cat|dog)s?$", {R"("cat")", R"("dogs")"}, {R"("cats s")", R"("cow")", R"("catdog")"}},
      // '"' and '\' come out escaped; a raw one cannot appear in JSON.
      {"^a\"b$", {R"("a\"b")"}, {R"("a"b")", R"("a\\"b")", R"("a\u0022b")"}},
      {"^a\\\\b$", {R"("a\\b")"}, {R"("a\b")", R"("a\\\\b")", R"("ab")"}},
      {"^[^\"]*$", {R"("abc")", R"("a\\b")", R"("a\nb")", R"("\u0001")", R"("\u001F")", R"("")"}, {R"("a\"b")"}},
      {"^[\"\\\\]+$", {R"("\"\\\"")"}, {R"("a")", R"("\\n")", R"("\n")"}},
      {"^.$", {R"("x")", "\"\xC3\xA9\"", "\"\xF0\x9F\x98\x80\"", R"("\t")", R"("\"")"},
       {R"("\n")", R"("\r")", "\"\xE2\x80\xA8\"", R"("xy")", R"("")"}},
      {"^\\s+$", {R"(" \t")", R"("\u000b")", R"("\u000B\f")", "\"\xC2\xA0\""}, {R"("x")", "\" \t\""}},
      {"^\\S+$", {R"("abc")"}, {R"("a b")", R"("")", R"("a\nb")"}},
      {"^\\w+@\\w+\\.com$", {R"("a_b@ex.com")"}, {R"("a@ex.org")", R"("a@excom")", R"("a-b@ex.com")"}},
      {"^\\W\\D$", {R"("-a")", R"("\"x")"}, {R"("a-")", R"("-1")"}},
      {"^x{2,3}$", {R"("xx")", R"("xxx")"}, {R"("x")", R"("xxxx")"}},
      {"^a{2,}$", {R"("aa")", R"("aaaaaaa")"}, {R"("a")", R"("aab")"}},
      {"^(ab){2}c?$", {R"("abab")", R"("ababc")"}, {R"("ab")", R"("abababc")"}},
      {"^\\x41\\u0042\\u{43}\\uD83D\\uDE00$", {"\"ABC\xF0\x9F\x98\x80\""}, {R"("ABC")"}},
      {"^a{$", {R"("a{")"}, {R"("a")"}},
      {"^a{,3}$", {R"("a{,3}")"}, {R"("aaa")"}},
      {"^\\$\\d+(\\.\\d{2})?$", {R"("$12.50")", R"("$3")"}, {R"("$12.5")", R"("12.50")"}},
      {"^\\/p\\.a\\*$", {R"("/p.a*")"}, {R"("/pxa*")", R"("\/p.a*")"}},
      {"^[^a-z]$", {R"("A")", R"("\"")", R"("\\")", R"("\n")", R"("\u0000")"}, {R"("a")", R"("q")"}},
      {"^[a-c-]$", {R"("-")", R"("b")"}, {R"("d")"}},
      {"^[\\d\\-+() ]{7,20}$", {R"("+1 (555) 123-4567")"}, {R"("555-12")", R"("555-1234x")"}},
      {"^a$|^b", {R"("a")", R"("b")", R"("bzzz")"}, {R"("ab")", R"("zb")"}},
      {"\\d$", {R"("abc1")", R"("1")"}, {R"("1a")"}},
      {"^\xC3\xA9+$", {"\"\xC3\xA9\xC3\xA9\""}, {R"("e")"}},
      {"^\\t\\n$", {R"("\t\n")", R"("\u0009\u000a")", R"("\u0009\u000A")"}, {"\"\t\n\"", R"("tn")"}},
      {"^[\\s\\S]{0,3}$", {R"("")", R"("a\"\\")"}, {R"("abcd")"}},
      {"^(a|)b$", {R"("ab")", R"("b")"}, {R"("aab")"}},
      {"^[^]$", {R"("x")", R"("\n")"}, {R"("")"}},
      {"", {R"("")", R"("anything \" \\ at all")"}, {R"(5)"}},
      {"^$", {R"("")"}, {R"("a")"}},
      {"^(?<year>\\d{4})-(\\d\\d)$", {R"("2026-05")"}, {R"("26-05")"}},
      {"^\\cJ\\0$", {R"("\n\u0000")"}, {R"("\n")"}},
  };
  for (const PatternCase& pc : cases) {
    const std::string schema = ojson{{"type", "string"}, {"pattern", pc.pattern}}.dump();
    const Checker c(schema);
    for (const char* t : pc.accepted) {
      EXPECT_TRUE(c.accepts(t)) << schema << "\n  should accept " << t;
      EXPECT_TRUE(ojson::accept(t)) << t << " is not JSON";
    }
    for (const char* t : pc.rejected) EXPECT_FALSE(c.accepts(t)) << schema << "\n  should reject " << t;
  }
}

// Random strings over a small alphabet, JSON-encoded as nlohmann writes them
// (the spellings the grammar produces), against std::regex (ECMAScript,
// regex_search: unanchored like JSON Schema) as the reference.
TEST(JsonSchemaPattern, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<const char*> patterns = {
      "^[ab]+$",      "ab",          "^a.b$",         "^(a|bc)*$",      "^a?b{1,3}c*$", "^[^ab\"]+$",
      "^\\d+\\.\\d?$", "b\\\\$",      "^(\"|\\\\)\\w", "^\\s*\\S\\s*$",  "a|^b|c$",      "^(?:ab|a)(?:bc|c)$",
      "^[\\w.-]{2,4}$", "^[a-c\\d]{0,2}[^1]$", "x{2}",  "^((a|b)c){1,2}$", "^\\W+",        "^.{3}$",
  };
  const std::string alphabet = "abcx1.\"\\ \t\n-_";
  std::mt19937 rng(7);
  for (const char* p : patterns) {
    const Checker c(ojson{{"type", "string"}, {"pattern", p}}.dump());
    const std::regex re(p, std::regex::ECMAScript);
    int matched = 0;
    for (int k = 0; k < 3000; ++k) {
      std::string s;
      const int len = static_cast<int>(rng() % 7);
      for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
      const bool want = std::regex_search(s, re);
      matched += want;
      EXPECT_EQ(c.accepts(nlohmann::json(s).dump()), want) << p << " on " << nlohmann::json(s).dump();
    }
    EXPECT_GT(matched, 0) << p << ": no random string matched, the test checks nothing";
  }
}

TEST(JsonSchemaPattern, UnsupportedConstructsAreRefusedByNameAndPlace) {
  auto err = [](const std::string& pattern, const std::string& extra = "") {
    return compile_error(R"({"properties":{"s":{"type":"string","pattern":)" + nlohmann::json(pattern).dump() + extra +
                         "}}}");
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"^(?=a)b", "lookaround"},         {"^(?!a)b", "lookaround"},
      {"(?<=a)b", "lookaround"},         {"(?<!a)b", "lookaround"},
      {"^(a)\\1$", "backreference"},     {"^(?<x>a)\\k<x>$", "backreference"},
      {"^a*?$", "lazy quantifier"},      {"^a{1,3}?$", "lazy quantifier"},
      {"\\bword\\b", "word-boundary"},   {"^\\p{L}+$", "Unicode property"},
      {"a^b", "anchor '^'"},             {"a$b", "anchor '$'"},
      {"(^a)", "anchor '^'"},            {"^a{2000}$", "repetition count above 1000"},
      {"^(a{100}){100}$", "expansion above"}, {"^(a*)*$", "empty string"},
      {"^(a|b?)+$", "empty string"},     {"^(\\d?){50}$", "empty string"},
      {"^(\\d{1,100}){1,50}$", "expansion above 2000"},     {"^[]$", "matches no character"},
      {"^\\q$", "escape '\\q'"},         {"^\\01$", "octal"},
      {std::string(40, '(') + "a" + std::string(40, ')'), "nested deeper than 32"},
      {"^(a", "valid regular expression"}, {"^a)$", "valid regular expression"},
      {"^*a$", "valid regular expression"}, {"^a**$", "valid regular expression"},
      {"^[b-a]$", "valid regular expression"}, {"^[a$", "valid regular expression"},
  };
  for (const auto& [pattern, construct] : refused) {
    const std::string e = err(pattern);
    EXPECT_EQ(e.rfind("#/properties/s: 'pattern' " + nlohmann::json(pattern).dump(), 0), 0u) << pattern << ": " << e;
    EXPECT_NE(e.find(construct), std::string::npos) << pattern << ": " << e;
  }
  EXPECT_EQ(err("^a+$", R"(,"minLength":2)"), "#/properties/s: 'pattern' with 'minLength' / 'maxLength' is not supported");
  EXPECT_EQ(err("^a+$", R"(,"format":"date")"), "#/properties/s: 'pattern' with 'format' is not supported");
  EXPECT_EQ(compile_error(R"({"type":"string","pattern":5})"), "#: 'pattern' must be a string");
}

TEST(JsonSchemaPattern, EmbeddedInObjectsAndToolRules) {
  const Checker c(R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},
      "n":{"type":"integer","minimum":1,"maximum":12}},"required":["id","n"]})");
  EXPECT_TRUE(c.accepts(R"({"id": "AB-123", "n": 12})"));
  EXPECT_FALSE(c.accepts(R"({"id": "AB-1234", "n": 12})"));
  EXPECT_FALSE(c.accepts(R"({"id": "AB-123", "n": 13})"));
  EXPECT_FALSE(c.accepts(R"({"id": "AB-123", "n": 0})"));
  const SchemaRules r = json_schema_rules(ojson::parse(R"({"type":"string","pattern":"a"})"), "t0-");
  EXPECT_NE(r.rules.find("json-char*"), std::string::npos) << r.rules;
}

// What the OpenAI SDK's zodResponseFormat writes for .nullable() on a
// primitive and for .optional().nullable().
TEST(JsonSchema, NullableAndBranchesThatMatchNothing) {
  auto g = [](const char* schema) {
    return std::make_shared<const Grammar>(compile_json_schema(ojson::parse(schema)));
  };
  const auto s = g(R"({"type":"string","maxLength":3,"nullable":true})");
  for (const char* ok : {"\"ab\"", "null"}) EXPECT_TRUE(accepts(s, ok)) << ok;
  for (const char* bad : {"\"abcd\"", "0", "nul"}) EXPECT_FALSE(accepts(s, bad)) << bad;
  const auto not_null = g(R"({"type":"integer","nullable":false})");
  EXPECT_TRUE(accepts(not_null, "7"));
  EXPECT_FALSE(accepts(not_null, "null"));
  const auto opt = g(R"({"anyOf":[{"anyOf":[{"not":{}},{"type":"boolean"}]},{"type":"null"}]})");
  for (const char* ok : {"true", "null"}) EXPECT_TRUE(accepts(opt, ok)) << ok;
  EXPECT_FALSE(accepts(opt, "1"));
  const auto message = compile_error;
  EXPECT_EQ(message(R"({"anyOf":[{"not":{}},false]})"), "#: every branch of 'anyOf' matches nothing");
  EXPECT_EQ(message(R"({"not":{"type":"string"}})"), "#: 'not' is not supported here");
  EXPECT_NE(message(R"({"anyOf":[{"not":{"type":"string"}},{"type":"null"}]})").find("'not'"), std::string::npos);
  EXPECT_EQ(message(R"({"type":"string","nullable":"yes"})"), "#: 'nullable' must be a boolean");
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
