// Grammar bounds on client input (issue 42): nesting refused while parsing
// (GBNF groups, chains of leading rule references: util/json_depth.h's
// limit), and check_followable() refusing, before generation, what the
// matcher could not follow (more than kMaxStacks parse stacks), with the
// GrammarLimit the matcher itself throws for what the check cannot see.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "util/json_depth.h"

namespace nexus::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf(const std::string& text) { return std::make_shared<Grammar>(parse_gbnf(text)); }

std::string error_of(const std::string& text) {
  try {
    parse_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarLimits, DeeplyNestedGroupsAreRefusedNotRecursedInto) {
  const int n = 10000;  // 20 KB: crashed the parser's recursion before the bound
  const std::string deep = "root ::= " + std::string(n, '(') + "\"x\"" + std::string(n, ')');
  EXPECT_NE(error_of(deep).find("nested more than 128 levels"), std::string::npos) << error_of(deep);
  const int ok = max_json_depth() - 1;
  EXPECT_EQ(error_of("root ::= " + std::string(ok, '(') + "\"x\"" + std::string(ok, ')')), "");
}

TEST(GrammarLimits, LongChainsOfLeadingReferencesAreRefusedWhateverTheirOrder) {
  // r0 ::= r1 "x", r1 ::= r2 "x", ...: the matcher's expansion recurses once
  // per link. Defined in both orders: the check follows the chain, not the
  // definitions' order.
  const int n = 10000;
  std::string forward = "root ::= r0\n", backward;
  for (int i = 0; i < n; ++i) forward += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
  forward += "r" + std::to_string(n) + " ::= \"y\"\n";
  for (int i = n; i >= 0; --i)
    backward += "r" + std::to_string(i) + " ::= " + (i == n ? std::string("\"y\"") : "r" + std::to_string(i + 1) + " \"x\"") + "\n";
  backward += "root ::= r0\n";
  for (const std::string& g : {forward, backward})
    EXPECT_NE(error_of(g).find("nests leading rule references more than 128 levels"), std::string::npos)
        << error_of(g).substr(0, 200);
  // A short chain is a grammar like any other.
  EXPECT_EQ(error_of("root ::= a \"x\"\na ::= b \"y\"\nb ::= \"z\""), "");
}

TEST(GrammarLimits, TooManyParseStacksAreRefusedBeforeGeneration) {
  std::string alts = "root ::= \"x\"";
  for (int i = 1; i < 5000; ++i) alts += " | \"x\"";
  const auto g = gbnf(alts);  // parses: the bound is the matcher's
  try {
    check_followable(g);
    FAIL() << "5,000 alternatives starting alike passed the check";
  } catch (const GrammarLimit& e) {
    EXPECT_NE(std::string(e.what()).find("more than 4096 parse stacks"), std::string::npos) << e.what();
  }
}

TEST(GrammarLimits, APassingGrammarIsRememberedARefusedOneIsRefusedEveryTime) {
  std::string alts = "root ::= \"y\"";
  for (int i = 1; i < 5000; ++i) alts += " | \"y\"";
  for (int i = 0; i < 2; ++i) EXPECT_THROW(check_followable(gbnf(alts)), GrammarLimit) << "check " << i;
  // Another copy of a grammar that passed (same content, another object) passes.
  EXPECT_NO_THROW(check_followable(gbnf("root ::= \"a\" [0-9]+")));
  EXPECT_NO_THROW(check_followable(gbnf("root ::= \"a\" [0-9]+")));
}

TEST(GrammarLimits, AnEnumOfFiveThousandStringsIsRefusedBeforeGeneration) {
  nlohmann::ordered_json names = nlohmann::ordered_json::array();
  for (int i = 0; i < 5000; ++i) names.push_back("name_" + std::to_string(i));
  const auto g = std::make_shared<Grammar>(compile_json_schema({{"enum", names}}));
  EXPECT_THROW(check_followable(g), GrammarLimit);
  // The same shape at a hundred strings is followed.
  nlohmann::ordered_json few = nlohmann::ordered_json::array();
  for (int i = 0; i < 100; ++i) few.push_back("name_" + std::to_string(i));
  EXPECT_NO_THROW(check_followable(std::make_shared<Grammar>(compile_json_schema({{"enum", few}}))));
}

TEST(GrammarLimits, ANestedRuleTooWideIsFoundWhereverItIsReferenced) {
  // The wide rule sits behind a prefix no walk of a few states would reach:
  // the check expands every rule reference.
  std::string wide = "wide ::= \"a\"";
  for (int i = 1; i < 5000; ++i) wide += " | \"a\"";
  const auto g = gbnf("root ::= \"" + std::string(200, 'p') + "\" wide\n" + wide);
  EXPECT_THROW(check_followable(g), GrammarLimit);
}

TEST(GrammarLimits, RealGrammarsPassTheCheck) {
  EXPECT_NO_THROW(check_followable(gbnf(json_object_gbnf())));
  EXPECT_NO_THROW(check_followable(gbnf("root ::= (\"a\" | \"b\")* \"c\"")));
  const nlohmann::ordered_json schema = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}}},
        {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}},
        {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 150}}}}},
      {"required", {"name"}}};
  EXPECT_NO_THROW(check_followable(std::make_shared<Grammar>(compile_json_schema(schema))));
}

TEST(GrammarLimits, AnAmbiguityPastTheCheckedStatesThrowsGrammarLimitWhileMatching) {
  // Each "a" may open one or two pending "b"s: after n a's the stacks are
  // every way to owe them (Fibonacci many), past 4096 at about 18 a's, deeper
  // than the check's breadth-first walk of kCheckStates states reaches.
  const auto g = gbnf("root ::= r\nr ::= \"a\" r \"b\" | \"a\" \"a\" r \"b\" \"b\" | \"c\"");
  Matcher m(g, std::make_shared<VocabTrie>(std::vector<std::string>{"a", "b", "c"}));
  EXPECT_THROW(m.accept(std::string(40, 'a')), GrammarLimit);
}

}  // namespace
}  // namespace nexus::grammar
