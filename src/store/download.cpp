#include "store/download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "store/progress.h"
#include "store/sha256.h"

namespace nexus::store {
namespace {

// An open file descriptor, closed (and so unlocked) on every exit path.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

uint64_t file_size(int fd) {
  struct stat st{};
  return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

void say(const DownloadOptions& opt, const std::string& line) {
  if (opt.log) opt.log(line);
}

// Exclusive for this file: waits (saying so) while another pull holds it.
Fd lock_file(const std::string& path, const RemoteFile& file, const DownloadOptions& opt) {
  Fd lock(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.fd < 0) throw Error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  if (::flock(lock.fd, LOCK_EX | LOCK_NB) == 0) return lock;
  say(opt, fmt::format("waiting for another pull of {} to finish", file.name));
  while (::flock(lock.fd, LOCK_EX) != 0)
    if (errno != EINTR) throw Error(fmt::format("{}: cannot lock: {}", path, std::strerror(errno)));
  return lock;
}

// Fetches the rest of the file into `fd` (O_APPEND), resuming after cuts.
void fetch_rest(const RemoteFile& file, int fd, const DownloadOptions& opt) {
  const HttpRequest req{file.url, file.headers};
  for (int attempt = 1;; ++attempt) {
    const uint64_t offset = file_size(fd);
    if (file.size && offset == file.size) return;
    if (offset > 0) say(opt, fmt::format("resuming {} at byte {}", file.name, offset));
    std::optional<Progress> bar;
    if (opt.progress) bar.emplace(file.name, file.size, offset);
    try {
      const long status = http_download(req, fd, offset, [&](uint64_t n) {
        if (bar) bar->update(n);
      });
      if (bar) bar->finish();
      if (status == 416 && offset > 0) {  // nothing past our end: start over rather than guess
        if (::ftruncate(fd, 0) != 0) throw Error(fmt::format("cannot truncate the partial file: {}", std::strerror(errno)));
        continue;
      }
      require_ok(HttpResponse{status, {}, {}}, file.name, file.url, "");
      if (!file.size || file_size(fd) >= file.size) return;
      // A clean end before the stated size: the server closed early.
      if (attempt >= opt.attempts)
        throw Error(fmt::format("{}: the download ended at {} of {} bytes", file.name, file_size(fd), file.size));
    } catch (const NetworkError& e) {
      if (bar) bar->finish();
      if (!e.connected() && file_size(fd) == offset)
        throw NetworkError(fmt::format("{}: cannot reach {} ({}): offline? (the model is not in the store yet)",
                                       file.name, url_host(file.url), e.what()),
                           false);
      if (attempt >= opt.attempts)
        throw NetworkError(fmt::format("{}: the download broke {} times, last at byte {} ({}); run the pull again "
                                       "to resume",
                                       file.name, attempt, file_size(fd), e.what()),
                           true);
      say(opt, fmt::format("connection lost at byte {} ({}); retrying", file_size(fd), e.what()));
      std::this_thread::sleep_for(std::chrono::milliseconds(200) * (1 << std::min(attempt - 1, 4)));
    }
  }
}

}  // namespace

bool download_verified(const RemoteFile& file, const std::string& dest, const DownloadOptions& opt) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(dest).parent_path(), ec);
  if (ec) throw Error(fmt::format("{}: cannot create: {}", fs::path(dest).parent_path().string(), ec.message()));
  const Fd lock = lock_file(dest + ".lock", file, opt);
  if (fs::exists(dest, ec)) return false;  // a pull that held the lock finished it

  const std::string partial = dest + ".partial";
  {
    Fd out(::open(partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (out.fd < 0) throw Error(fmt::format("{}: cannot open: {}", partial, std::strerror(errno)));
    if (file.size && file_size(out.fd) > file.size && ::ftruncate(out.fd, 0) != 0)
      throw Error(fmt::format("{}: cannot truncate: {}", partial, std::strerror(errno)));
    fetch_rest(file, out.fd, opt);
    if (::fsync(out.fd) != 0) throw Error(fmt::format("{}: cannot sync: {}", partial, std::strerror(errno)));
  }
  const uint64_t got = fs::file_size(partial, ec);
  if (file.size && got != file.size) {
    fs::remove(partial, ec);
    throw Error(fmt::format("{}: the download has {} bytes, the registry states {}; it was discarded", file.name,
                            got, file.size));
  }
  const std::string sha = sha256_file(partial);
  if (sha != file.sha256) {
    fs::remove(partial, ec);
    throw Error(fmt::format("{}: SHA-256 mismatch: the registry states {}, the download is {}; it was discarded",
                            file.name, file.sha256, sha));
  }
  fs::rename(partial, dest, ec);
  if (ec) throw Error(fmt::format("{}: cannot rename to {}: {}", partial, dest, ec.message()));
  say(opt, fmt::format("{}: {} bytes, SHA-256 {} verified", file.name, got, sha));
  return true;
}

}  // namespace nexus::store
