// finish_reason_name (engine.h), in its own file: the server code and its
// fuzz targets (fuzz/CMakeLists.txt) need it without the engine.
#include "engine/engine.h"

namespace nexus {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

}  // namespace nexus
