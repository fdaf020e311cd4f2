#include "gateway/ws_transcript.h"

namespace nexus::gateway {

const char* ws_protocol_name(WsProtocol p) {
  switch (p) {
    case WsProtocol::Realtime: return "realtime";
    case WsProtocol::Responses: return "responses";
    case WsProtocol::Count: break;
  }
  return "?";
}

}  // namespace nexus::gateway
