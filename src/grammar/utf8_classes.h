// Code point classes -> UTF-8 byte sequences: the alternatives of byte-set
// sequences that match exactly the UTF-8 encodings (RFC 3629) of the code
// points in a set of ranges. The range splitting follows the classic
// construction (as in RE2 and Go's regexp/syntax, Russ Cox's utf8 ranges):
// a range of one encoded length is split until every byte position is a
// plain byte range. Surrogates (U+D800..U+DFFF) are never matched.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace nexus::grammar {

using CodeRange = std::pair<uint32_t, uint32_t>;  // inclusive

// Sorted, merged ranges of `ranges` without surrogates, clipped to U+10FFFF.
std::vector<CodeRange> normalize(std::vector<CodeRange> ranges);
// The complement of normalized ranges within [0, U+10FFFF] minus surrogates.
std::vector<CodeRange> complement(const std::vector<CodeRange>& normalized);

// Alternatives of byte-set sequences (1 to 4 sets each) for the code points
// of `normalized`; all one-byte ones are merged into a single sequence.
std::vector<std::vector<ByteSet>> utf8_sequences(const std::vector<CodeRange>& normalized);

}  // namespace nexus::grammar
