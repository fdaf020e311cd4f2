#include "server/crash_fault.h"

#include <atomic>
#include <cstdlib>

namespace nexus::server {

namespace {
std::atomic<bool> g_armed{false};
std::string g_needle;  // written once, before g_armed, before any thread reads it
}  // namespace

void set_crash_on_body(std::string needle) {
  if (needle.empty()) return;
  g_needle = std::move(needle);
  g_armed.store(true, std::memory_order_release);
}

void crash_if_faulty(std::string_view body) {
  if (!g_armed.load(std::memory_order_acquire)) return;
  if (body.find(g_needle) != std::string_view::npos) std::abort();
}

}  // namespace nexus::server
