// One registry file into the store, safely: resumable, verified, exclusive.
#pragma once

#include <functional>
#include <string>

#include "store/registry.h"

namespace nexus::store {

struct DownloadOptions {
  std::function<void(const std::string&)> log;  // one line per event (waiting, resuming, verified)
  bool progress = true;                          // the progress line on stderr (progress.h)
  int attempts = 5;                              // connections tried when one is cut, resuming each time
};

// Makes `dest` hold `file`'s bytes, checked against file.sha256:
//  - DEST.lock (flock) keeps a second pull of the same file waiting until the
//    first ends; it then finds DEST there and downloads nothing;
//  - bytes grow in DEST.partial, resumed with a Range request after a cut or
//    an interrupted pull (a server ignoring the Range starts it over);
//  - on a SHA-256 (or size) mismatch DEST.partial is deleted and nothing is
//    stored; on a match it is renamed to DEST, so DEST exists only verified.
// Returns true when it downloaded, false when DEST was already there.
// Throws Error ("SHA-256 mismatch ...", an HTTP status), NetworkError when the
// registry cannot be reached or every attempt was cut.
bool download_verified(const RemoteFile& file, const std::string& dest, const DownloadOptions& opt);

}  // namespace nexus::store
