// Embeds NEXUS_BUILTIN_MODEL_FILE (set by src/CMakeLists.txt to
// assets/models/stories260K-F16.gguf) with the assembler's .incbin: no
// generated source, no external tool, and the bytes land in .rodata as they
// are. (ccache sees .incbin and always compiles this file, so a changed model
// is never served from the cache; CMake's OBJECT_DEPENDS makes Ninja rebuild it.)
#include "assets/builtin_model.h"

#ifndef NEXUS_BUILTIN_MODEL_FILE
#error "NEXUS_BUILTIN_MODEL_FILE must name the GGUF file to embed"
#endif

// Page-aligned like an mmap'd file, so tensor data keeps the alignment the
// GGUF's offsets give it (general.alignment divides 4096).
asm(".section .rodata.nexus_builtin_model,\"a\",@progbits\n"
    ".p2align 12\n"
    ".globl nexus_builtin_model_begin\n.hidden nexus_builtin_model_begin\n"
    ".globl nexus_builtin_model_end\n.hidden nexus_builtin_model_end\n"
    "nexus_builtin_model_begin:\n"
    ".incbin \"" NEXUS_BUILTIN_MODEL_FILE "\"\n"
    "nexus_builtin_model_end:\n"
    ".previous\n");

extern "C" const uint8_t nexus_builtin_model_begin[];
extern "C" const uint8_t nexus_builtin_model_end[];

namespace nexus {

std::span<const uint8_t> builtin_model_bytes() {
  return {nexus_builtin_model_begin, static_cast<size_t>(nexus_builtin_model_end - nexus_builtin_model_begin)};
}

}  // namespace nexus
