// FrameScanner (server/ws_frame_guard.h): follows RFC 6455 frame headers over
// a client byte stream, however it is cut into reads, and rewrites a 64-bit
// payload length with its most significant bit set to zero (which Beast then
// refuses as non-canonical: close 1002). Nothing else is ever changed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "server/ws_frame_guard.h"

using nexus::server::FrameScanner;

namespace {

// A masked client frame with `payload` bytes; the length in the header is
// `header_len` (the 7-bit code and extended bytes chosen by its size), so a
// test can claim a length the bytes do not have.
std::string frame(uint64_t header_len, const std::string& payload, unsigned opcode = 1) {
  std::string f(1, static_cast<char>(0x80 | opcode));
  if (header_len < 126) {
    f += static_cast<char>(0x80 | header_len);
  } else if (header_len < 65536) {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>(header_len >> 8);
    f += static_cast<char>(header_len & 0xff);
  } else {
    f += static_cast<char>(0x80 | 127);
    for (int s = 56; s >= 0; s -= 8) f += static_cast<char>((header_len >> s) & 0xff);
  }
  f += "MASK";
  return f + payload;
}

// Scans `bytes` in reads of `chunk` bytes; returns them as rewritten.
std::string scan(FrameScanner& s, std::string bytes, size_t chunk) {
  for (size_t i = 0; i < bytes.size(); i += chunk)
    s.scan(reinterpret_cast<unsigned char*>(bytes.data()) + i, std::min(chunk, bytes.size() - i));
  return bytes;
}

}  // namespace

TEST(FrameScanner, ValidFramesPassUnchangedInAnyCut) {
  const std::string stream = frame(5, "hello") + frame(0, "", 9) + frame(300, std::string(300, 'x')) +
                             frame(70000, std::string(70000, 'y')) + frame(2, "ab", 8);
  for (const size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, stream.size()}) {
    FrameScanner s;
    EXPECT_EQ(scan(s, stream, chunk), stream) << "reads of " << chunk;
    EXPECT_FALSE(s.rewrote()) << chunk;
  }
}

TEST(FrameScanner, TopBitLengthIsZeroedAfterValidFrames) {
  const std::string good = frame(3, "abc") + frame(200, std::string(200, 'z'));
  const std::string bad = frame(uint64_t{1} << 63, "");
  for (const size_t chunk : {size_t{1}, size_t{5}, size_t{64}}) {
    FrameScanner s;
    const std::string out = scan(s, good + bad, chunk);
    EXPECT_TRUE(s.rewrote()) << chunk;
    EXPECT_EQ(out.substr(0, good.size()), good);
    // Header bytes 0-1 kept, the 8 length bytes zeroed, the mask kept.
    EXPECT_EQ(out.substr(good.size(), 2), bad.substr(0, 2));
    EXPECT_EQ(out.substr(good.size() + 2, 8), std::string(8, '\0')) << chunk;
    EXPECT_EQ(out.substr(good.size() + 10), "MASK");
  }
}

TEST(FrameScanner, LargestValidLengthIsKept) {
  FrameScanner s;
  const std::string f = frame((uint64_t{1} << 63) - 1, "");
  EXPECT_EQ(scan(s, f, 1), f);
  EXPECT_FALSE(s.rewrote());
}
