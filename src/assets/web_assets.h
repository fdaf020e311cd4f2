// The web chat and live dashboard (assets/web/), built into the binary
// (web_assets.cpp, an assembler .incbin as for the built-in model) and
// served by `nexus serve` at / (docs/server.md, "Web chat"). Plain HTML, CSS
// and JavaScript with no external reference: the page works offline and
// talks only to its own origin (/v1/realtime, /v1/stats/stream, /v1/models).
#pragma once

#include <string_view>

namespace nexus {

struct WebAsset {
  std::string_view path;          // the URL path it answers ("/", "/ui/app.js")
  std::string_view content_type;  // with charset
  std::string_view body;          // the file's bytes, in .rodata
};

// The asset served at `path` (no query string), or nullptr. "/" and
// "/dashboard" both serve index.html (the page picks its view by path).
const WebAsset* find_web_asset(std::string_view path);

}  // namespace nexus
