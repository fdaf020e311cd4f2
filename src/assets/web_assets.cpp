// Embeds the files of NEXUS_WEB_DIR (set by src/CMakeLists.txt to
// assets/web) with .incbin, as builtin_model.cpp embeds the model (CMake's
// OBJECT_DEPENDS rebuilds this file when one of them changes).
#include "assets/web_assets.h"

#include <array>
#include <cstddef>

#ifndef NEXUS_WEB_DIR
#error "NEXUS_WEB_DIR must name the folder of the web assets"
#endif

#define NEXUS_WEB_INCBIN(sym, file)                                              \
  asm(".section .rodata.nexus_web,\"a\",@progbits\n"                             \
      ".globl nexus_web_" #sym "_begin\n.hidden nexus_web_" #sym "_begin\n"      \
      ".globl nexus_web_" #sym "_end\n.hidden nexus_web_" #sym "_end\n"          \
      "nexus_web_" #sym "_begin:\n"                                              \
      ".incbin \"" NEXUS_WEB_DIR "/" file "\"\n"                                 \
      "nexus_web_" #sym "_end:\n"                                                \
      ".previous\n");                                                            \
  extern "C" const char nexus_web_##sym##_begin[];                               \
  extern "C" const char nexus_web_##sym##_end[];

NEXUS_WEB_INCBIN(index_html, "index.html")
NEXUS_WEB_INCBIN(style_css, "style.css")
NEXUS_WEB_INCBIN(chat_js, "chat.js")
NEXUS_WEB_INCBIN(dashboard_js, "dashboard.js")
NEXUS_WEB_INCBIN(chart_js, "chart.js")
NEXUS_WEB_INCBIN(auth_js, "auth.js")
// The TypeScript SDK's compiled ESM (clients/typescript/web-assets.mjs).
NEXUS_WEB_INCBIN(sdk_index_js, "sdk/index.js")
NEXUS_WEB_INCBIN(sdk_completions_js, "sdk/completions.js")
NEXUS_WEB_INCBIN(sdk_http_js, "sdk/http.js")
NEXUS_WEB_INCBIN(sdk_errors_js, "sdk/errors.js")
NEXUS_WEB_INCBIN(sdk_retry_js, "sdk/retry.js")
NEXUS_WEB_INCBIN(sdk_sse_js, "sdk/sse.js")
NEXUS_WEB_INCBIN(sdk_realtime_js, "sdk/realtime.js")

namespace nexus {
namespace {

#define NEXUS_WEB_BODY(sym) \
  std::string_view(nexus_web_##sym##_begin, static_cast<size_t>(nexus_web_##sym##_end - nexus_web_##sym##_begin))

constexpr std::string_view kHtml = "text/html; charset=utf-8";
constexpr std::string_view kCss = "text/css; charset=utf-8";
constexpr std::string_view kJs = "text/javascript; charset=utf-8";

const std::array<WebAsset, 15>& assets() {
  static const std::array<WebAsset, 15> a{{
      {"/", kHtml, NEXUS_WEB_BODY(index_html)},
      {"/index.html", kHtml, NEXUS_WEB_BODY(index_html)},
      {"/dashboard", kHtml, NEXUS_WEB_BODY(index_html)},
      {"/ui/style.css", kCss, NEXUS_WEB_BODY(style_css)},
      {"/ui/chat.js", kJs, NEXUS_WEB_BODY(chat_js)},
      {"/ui/dashboard.js", kJs, NEXUS_WEB_BODY(dashboard_js)},
      {"/ui/chart.js", kJs, NEXUS_WEB_BODY(chart_js)},
      {"/ui/auth.js", kJs, NEXUS_WEB_BODY(auth_js)},
      {"/ui/sdk/index.js", kJs, NEXUS_WEB_BODY(sdk_index_js)},
      {"/ui/sdk/completions.js", kJs, NEXUS_WEB_BODY(sdk_completions_js)},
      {"/ui/sdk/http.js", kJs, NEXUS_WEB_BODY(sdk_http_js)},
      {"/ui/sdk/errors.js", kJs, NEXUS_WEB_BODY(sdk_errors_js)},
      {"/ui/sdk/retry.js", kJs, NEXUS_WEB_BODY(sdk_retry_js)},
      {"/ui/sdk/sse.js", kJs, NEXUS_WEB_BODY(sdk_sse_js)},
      {"/ui/sdk/realtime.js", kJs, NEXUS_WEB_BODY(sdk_realtime_js)},
  }};
  return a;
}

}  // namespace

const WebAsset* find_web_asset(std::string_view path) {
  for (const WebAsset& a : assets())
    if (a.path == path) return &a;
  return nullptr;
}

}  // namespace nexus
