// Data only: the pre-tokenizer families of pre_families.h.
#include "tokenizer/pre_families.h"

namespace nexus::tok {
namespace {

// Shared pieces, spliced by adjacent-literal concatenation.
// English contractions, case-insensitive: tokenizer.json's (?i:'s|'t|...)
// written out as llama.cpp does (so 's' never matches U+017F LONG S).
#define NX_CONTRACTIONS R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
// The whitespace tail of the Llama 3 family.
#define NX_WS_TAIL R"re(|\s*[\r\n]+|\s+(?!\S)|\s+)re"
// "Upper-case then lower-case letters" words of GPT-4o / Tekken (marks count
// as letters of either case), optionally followed by `suffix`.
#define NX_CASED_WORDS(suffix)                                                         \
  R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re" \
  suffix                                                                                \
  R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re" suffix
// Kana and the CJK ideographs DeepSeek V3 isolates.
#define NX_CJK_KANA R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re"
// DeepSeek V3's word regex: ASCII punctuation glued to a Latin word, letters
// with marks, punctuation/symbol runs, whitespace.
#define NX_DEEPSEEK3_WORDS                                                      \
  R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?)re" \
  R"re([\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*)re" NX_WS_TAIL
// Bloom / Poro / Viking: runs of anything but whitespace and sentence
// punctuation. Oniguruma reads tokenizer.json's [^(\s|[.,!?...])] as one
// negated class that also holds '(', '|' and ')', and so does llama.cpp.
#define NX_BLOOM \
  R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re"

// GPT-2 (openai/gpt-2 encoder.py).
constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
// Llama 3 (Meta-Llama-3 tokenizer.json): digits in runs of up to three.
constexpr const char* kLlama3 =
    NX_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)re" NX_WS_TAIL;
// Qwen 2: as Llama 3 but one digit per piece.
constexpr const char* kQwen2 =
    NX_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)re" NX_WS_TAIL;
constexpr const char* kDigits1to3 = R"re(\p{N}{1,3})re";
constexpr const char* kDigit = R"re(\p{N})re";
constexpr const char* kGpt4o = NX_CASED_WORDS("(?:" NX_CONTRACTIONS ")?")
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*)re" NX_WS_TAIL;
constexpr const char* kNewlineRuns = R"re([^\n]+|[\n]+)re";

template <size_t N>
constexpr std::span<const char* const> list(const char* const (&a)[N]) {
  return std::span<const char* const>(a, N);
}

constexpr const char* kDefaultRe[] = {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re",
                                      R"re([0-9][0-9][0-9])re"};
constexpr const char* kLlama3Re[] = {kLlama3};
constexpr const char* kMinicpm5Re[] = {
    kDigits1to3,
    NX_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*)re" NX_WS_TAIL};
constexpr const char* kJais2Re[] = {
    NX_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)re"
    R"re(|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S))re"
    R"re(|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re"};
constexpr const char* kDeepseekLlmRe[] = {
    "[\r\n]",
    // DeepSeek's tokenizer.json lists the cased letters (Lu, Ll, Lt) of its
    // Unicode version range by range; \p{L&} is that set.
    R"re(\s?\p{L&}+)re",
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
    R"re(\s+$)re",
    R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re",
    R"re(\p{N}+)re"};
constexpr const char* kDeepseek3Re[] = {kDigits1to3, NX_CJK_KANA, NX_DEEPSEEK3_WORDS};
constexpr const char* kSpark25Re[] = {
    kDigits1to3, NX_CJK_KANA,
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re"
    R"re(| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
    kDigit};
constexpr const char* kYoutuRe[] = {
    R"re([\x{AC00}-\x{D7A3}\x{3131}-\x{318E}]+)re"
    R"re(|[\x{FF01}\x{2026}\x{201C}\x{201D}\x{2018}\x{2019}\x{2014}\x{FF1A}\x{FF1B}\x{FF0C}\x{3001}-\x{303F}\x{FE30}-\x{FE4F}]+)re"
    R"re(|[\x{3105}-\x{312F}]+|[\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
    NX_CASED_WORDS("(?:" NX_CONTRACTIONS ")?")
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*)re" NX_WS_TAIL};
constexpr const char* kDeepseekCoderRe[] = {
    "[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re",
    R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re", kDigit};
constexpr const char* kFalconRe[] = {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2,
                                     R"re([0-9][0-9][0-9])re"};
constexpr const char* kStarcoderRe[] = {kDigit, kGpt2};
constexpr const char* kGpt2Re[] = {kGpt2};
constexpr const char* kQwen2Re[] = {kQwen2};
constexpr const char* kQwen35Re[] = {
    NX_CONTRACTIONS
    R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*)re" NX_WS_TAIL};
constexpr const char* kBloomRe[] = {NX_BLOOM};
constexpr const char* kVikingRe[] = {NX_BLOOM, kDigit};
constexpr const char* kTekkenRe[] = {
    NX_CASED_WORDS("") R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*)re" NX_WS_TAIL};
constexpr const char* kChameleonRe[] = {
    R"re(<sentinel:[0-9]+>)re", R"re((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)re",
    "([\t\n]|    |  )", kDigit, R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2};
constexpr const char* kGpt4oRe[] = {kGpt4o};
constexpr const char* kTinyAyaRe[] = {R"re(\d{1,3}(?=(?:\d{3})*\b))re", kGpt4o};
// Moonshot's tiktoken pattern (tokenization_kimi.py): Han runs, then GPT-4o
// style words of non-Han letters. llama.cpp implements it by hand.
constexpr const char* kKimiK2Re[] = {
    R"re(\p{Han}+)re"
    R"re(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*)re"
    R"re((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?:)re" NX_CONTRACTIONS R"re()?)re"
    R"re(|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+)re"
    R"re((?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?:)re" NX_CONTRACTIONS R"re()?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)re" NX_WS_TAIL};
// SuperBPE: an empty match that splits digit runs into groups of three from
// the right (1234567 -> 1|234|567).
constexpr const char* kSuperbpeRe[] = {R"re(\p{N}+)re", R"re((?=(\d{3})+(?!\d)))re"};
constexpr const char* kBailingRe[] = {
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"};
constexpr const char* kSeedCoderRe[] = {
    NX_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+)re" NX_WS_TAIL};
constexpr const char* kUfakzekaRe[] = {
    R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)re" NX_WS_TAIL};
// AFMoE: llama.cpp's hand-written \p{AFMoE_digits} (digit runs in groups of
// three from the right) as a regex, then CJK / Southeast Asian scripts.
constexpr const char* kAfmoeRe[] = {
    R"re(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re",
    R"re([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{F900}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF})re"
    R"re(\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{0E40}-\x{0E7F}\x{0E80}-\x{0EFF}\x{1780}-\x{17FF})re"
    R"re(\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)re",
    NX_DEEPSEEK3_WORDS};
constexpr const char* kLagunaRe[] = {kNewlineRuns, kQwen2};
constexpr const char* kExaoneMoeRe[] = {
    NX_CONTRACTIONS R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"};
constexpr const char* kGemma4Re[] = {kNewlineRuns};
constexpr const char* kNoRe[] = {""};

constexpr const char* kDefaultN[] = {"default"};
constexpr const char* kMinicpm5N[] = {"minicpm5"};
constexpr const char* kLlama3N[] = {"llama3",   "llama-v3", "llama-bpe", "falcon3",     "falcon-h1",
                                    "pixtral",  "midm-2.0", "lfm2",      "jina-v5-nano"};
constexpr const char* kDeepseekLlmN[] = {"deepseek-llm"};
constexpr const char* kDeepseekCoderN[] = {"deepseek-coder"};
constexpr const char* kDeepseek3N[] = {"deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"};
constexpr const char* kSpark25N[] = {"spark2_5"};
constexpr const char* kYoutuN[] = {"youtu"};
constexpr const char* kFalconN[] = {"falcon"};
constexpr const char* kStarcoderN[] = {"starcoder", "refact", "command-r",  "smollm",
                                       "codeshell", "exaone", "minerva-7b", "mellum2"};
// "gpt2" is not a llama.cpp name; Nexus accepted it before and keeps it.
constexpr const char* kGpt2N[] = {
    "gpt-2",      "gpt2",         "phi-2",       "jina-es",  "jina-de", "gigachat",
    "jina-v2-es", "jina-v2-de",   "a.x-4.0",     "mellum",   "modern-bert", "jina-v1-en",
    "jina-v2-code", "roberta-bpe", "exaone4",    "mpt",      "olmo",    "jais",
    "trillion",   "granite-docling"};
constexpr const char* kJais2N[] = {"jais-2"};
constexpr const char* kGemma4N[] = {"gemma4", "granite-embed-multi-311m"};
constexpr const char* kSarvamN[] = {"sarvam-moe"};
constexpr const char* kWhitespaceN[] = {"whitespace"};
constexpr const char* kQwen2N[] = {"qwen2",  "deepseek-r1-qwen", "kormo",   "f2llmv2",
                                   "megrez", "stablelm2",        "hunyuan", "solar-open"};
constexpr const char* kQwen35N[] = {"qwen35"};
constexpr const char* kDbrxN[] = {"dbrx", "smaug-bpe"};
constexpr const char* kBloomN[] = {"poro-chat", "bloom", "gpt3-finnish"};
constexpr const char* kChatglm4N[] = {"glm4", "chatglm-bpe"};
constexpr const char* kVikingN[] = {"viking"};
constexpr const char* kTekkenN[] = {"tekken"};
constexpr const char* kChameleonN[] = {"chameleon"};
constexpr const char* kGpt4oN[] = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"};
constexpr const char* kGraniteEmbN[] = {"granite-embed-multi-97m"};
constexpr const char* kTinyAyaN[] = {"tiny_aya", "cohere2moe"};
constexpr const char* kSuperbpeN[] = {"superbpe"};
constexpr const char* kBailingN[] = {"bailingmoe", "bailingmoe2", "llada-moe"};
constexpr const char* kSeedCoderN[] = {"seed-coder"};
constexpr const char* kKimiK2N[] = {"kimi-k2"};
constexpr const char* kUfakzekaN[] = {"ufakzeka"};
constexpr const char* kGrok2N[] = {"grok-2"};
constexpr const char* kAfmoeN[] = {"afmoe"};
constexpr const char* kLagunaN[] = {"laguna"};
constexpr const char* kExaoneMoeN[] = {"exaone-moe"};

#undef NX_CONTRACTIONS
#undef NX_WS_TAIL
#undef NX_CASED_WORDS
#undef NX_CJK_KANA
#undef NX_DEEPSEEK3_WORDS
#undef NX_BLOOM

// {family, names, regexes, ignore_merges, add_bos, byte_encode, refused}
const PreFamily kFamilies[] = {
    {"default", list(kDefaultN), list(kDefaultRe)},
    {"minicpm5", list(kMinicpm5N), list(kMinicpm5Re), true},
    {"llama3", list(kLlama3N), list(kLlama3Re), true, true},
    {"deepseek-llm", list(kDeepseekLlmN), list(kDeepseekLlmRe)},
    {"deepseek-coder", list(kDeepseekCoderN), list(kDeepseekCoderRe)},
    {"deepseek3-llm", list(kDeepseek3N), list(kDeepseek3Re)},
    {"spark2_5", list(kSpark25N), list(kSpark25Re)},
    {"youtu", list(kYoutuN), list(kYoutuRe), true},
    {"falcon", list(kFalconN), list(kFalconRe)},
    {"starcoder", list(kStarcoderN), list(kStarcoderRe)},
    {"gpt2", list(kGpt2N), list(kGpt2Re)},
    {"jais2", list(kJais2N), list(kJais2Re)},
    // llama.cpp also forces add_bos on for these; here it is the default.
    {"gemma4", list(kGemma4N), list(kGemma4Re), false, true, false},
    {"sarvam-moe", list(kSarvamN), list(kGemma4Re), false, false, false},
    {"whitespace", list(kWhitespaceN), list(kNoRe), false, false, true,
     "it belongs to the \"whitespace\" tokenizer model (jina-embeddings-v2-base-zh), which drops "
     "whitespace and is not implemented"},
    {"qwen2", list(kQwen2N), list(kQwen2Re)},
    {"qwen35", list(kQwen35N), list(kQwen35Re)},
    // Same regex as llama3, but llama.cpp keeps merges and the BOS default.
    {"dbrx", list(kDbrxN), list(kLlama3Re)},
    {"bloom", list(kBloomN), list(kBloomRe)},
    {"chatglm4", list(kChatglm4N), list(kLlama3Re)},
    {"viking", list(kVikingN), list(kVikingRe)},
    {"tekken", list(kTekkenN), list(kTekkenRe), true, true},
    {"chameleon", list(kChameleonN), list(kChameleonRe), false, true},
    {"gpt4o", list(kGpt4oN), list(kGpt4oRe)},
    // llama.cpp adds \p{M} to its gpt-4o lookaheads here; the original
    // gpt-4o regex already counts marks as letters.
    {"granite-emb-multi", list(kGraniteEmbN), list(kGpt4oRe), true},
    {"tiny_aya", list(kTinyAyaN), list(kTinyAyaRe)},
    {"superbpe", list(kSuperbpeN), list(kSuperbpeRe)},
    {"bailingmoe", list(kBailingN), list(kBailingRe)},
    {"seed-coder", list(kSeedCoderN), list(kSeedCoderRe)},
    {"kimi-k2", list(kKimiK2N), list(kKimiK2Re)},
    {"ufakzeka", list(kUfakzekaN), list(kUfakzekaRe)},
    {"grok-2", list(kGrok2N), list(kQwen2Re)},
    {"afmoe", list(kAfmoeN), list(kAfmoeRe)},
    {"laguna", list(kLagunaN), list(kLagunaRe)},
    {"exaone-moe", list(kExaoneMoeN), list(kExaoneMoeRe)},
};

}  // namespace

std::span<const PreFamily> pre_families() { return kFamilies; }

const PreFamily* find_pre_family(std::string_view name) {
  for (const PreFamily& f : kFamilies) {
    for (const char* n : f.names) {
      if (name == n) return &f;
    }
  }
  return nullptr;
}

}  // namespace nexus::tok
