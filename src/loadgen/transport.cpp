#include "loadgen/transport.h"

namespace nexus::loadgen {

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::None: return "none";
    case ErrorKind::Connect: return "connect";
    case ErrorKind::HttpStatus: return "http_status";
    case ErrorKind::Timeout: return "timeout";
    case ErrorKind::Connection: return "connection";
    case ErrorKind::Server: return "server_error";
    case ErrorKind::Protocol: return "protocol";
  }
  return "unknown";
}

std::string RequestResult::error_key() const {
  if (error == ErrorKind::None) return {};
  if (error == ErrorKind::HttpStatus) return "http_" + std::to_string(http_status);
  return error_kind_name(error);
}

}  // namespace nexus::loadgen
