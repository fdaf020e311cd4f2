// nexus_faulty: the `nexus` command line with a test-only crash fault
// (server/crash_fault.h), for the gateway's query-of-death tests. Built
// with the tests, never installed; `nexus` itself has no way to arm it.
//
//   nexus_faulty --crash-on-body TEXT serve -m MODEL ...
//
// is `nexus serve -m MODEL ...` whose process aborts on any request body or
// realtime message that holds TEXT.
#include <cstring>
#include <vector>

#include "cli/run_cli.h"
#include "server/crash_fault.h"

int main(int argc, char** argv) {
  std::vector<char*> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--crash-on-body") == 0 && i + 1 < argc) {
      nexus::server::set_crash_on_body(argv[++i]);
      continue;
    }
    args.push_back(argv[i]);
  }
  args.push_back(nullptr);
  return nexus::cli::run_cli(static_cast<int>(args.size()) - 1, args.data());
}
