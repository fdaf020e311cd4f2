// A crash fault for the gateway's tests (docs/gateway.md, "Query of
// death"): a replica that dies, as a query of death kills its process, on a
// request body or realtime client message holding a given text. Off unless
// set_crash_on_body() was called, which only the test binary
// tests/faulty/nexus_faulty.cpp does; the `nexus` binary has no option or
// environment variable that reaches it.
#pragma once

#include <string>
#include <string_view>

namespace nexus::server {

// Arms the fault (before any thread starts): every later request body or
// realtime message that contains `needle` (non-empty) crashes the process.
void set_crash_on_body(std::string needle);

// std::abort() (SIGABRT: a real crash, no unwinding, no answer) when the
// fault is armed and `body` contains its text; else nothing.
void crash_if_faulty(std::string_view body);

}  // namespace nexus::server
