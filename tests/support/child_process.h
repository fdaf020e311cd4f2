// ChildProcess: runs a program with its stdout on a pipe (stderr inherited),
// for tests that drive the `nexus` binary as a separate process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace nexus::test {

class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv);  // throws std::runtime_error
  ~ChildProcess();  // SIGKILLs and reaps the child if it is still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next line of stdout (without '\n'); nullopt on EOF or timeout.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Sends `sig` (0: none, only wait) and waits (bounded) for the exit;
  // returns the exit code, 128 + signal when killed by one, or -1 on timeout.
  int stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffered_;
};

}  // namespace nexus::test
