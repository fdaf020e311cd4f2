// StreamDecoder: token pieces -> text that only ever contains whole UTF-8
// characters (see tokenizer.h). A piece may end inside a character (byte
// fallback tokens, byte-level BPE), so the unfinished tail is held back.
// Bytes that can no longer become valid are replaced by U+FFFD at once;
// whatever is still pending at flush() is replaced too.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace nexus {

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_to_piece(id);
  const size_t ready = pending_.size() - utf8::incomplete_tail(pending_);
  std::string out = utf8::sanitize(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace nexus
