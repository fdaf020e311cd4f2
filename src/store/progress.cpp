#include "store/progress.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

namespace nexus::store {
namespace {

std::string mib(uint64_t n) { return fmt::format("{:.1f}", n / 1048576.0); }

std::string duration(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
}

}  // namespace

Progress::Progress(std::string label, uint64_t total, uint64_t start, FILE* out)
    : label_(std::move(label)), total_(total), start_(start), done_(start), out_(out),
      tty_(::isatty(::fileno(out)) == 1), t0_(Clock::now()), last_(t0_) {}

std::string Progress::line(uint64_t done, uint64_t total, double bytes_per_s, bool bar) {
  std::string s = total ? fmt::format("{}/{} MiB", mib(done), mib(total)) : fmt::format("{} MiB", mib(done));
  if (total) {
    const double f = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    s += fmt::format(" {:3.0f}%", 100 * f);
    if (bar) {
      constexpr int kWidth = 24;
      const int fill = static_cast<int>(f * kWidth);
      s += " [" + std::string(fill, '=') + (fill < kWidth ? ">" : "") + std::string(std::max(0, kWidth - fill - 1), ' ') + "]";
    }
  }
  s += fmt::format("  {:.1f} MiB/s", bytes_per_s / 1048576.0);
  if (total && bytes_per_s > 0 && done < total) s += "  ETA " + duration((total - done) / bytes_per_s);
  return s;
}

void Progress::print(uint64_t done) {
  const double secs = std::chrono::duration<double>(Clock::now() - t0_).count();
  const double rate = secs > 0 ? (done - std::min(done, start_)) / secs : 0;
  const std::string text = label_ + "  " + line(done, total_, rate, tty_);
  if (tty_)
    std::fprintf(out_, "\r%s\033[K", text.c_str());
  else
    std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void Progress::update(uint64_t done) {
  done_ = done;
  const auto now = Clock::now();
  if (now - last_ < (tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(5000))) return;
  last_ = now;
  print(done);
}

void Progress::finish() {
  print(done_);
  if (tty_) std::fputc('\n', out_);
}

}  // namespace nexus::store
