// CPU features that select the kernels, read once from CPUID (and XGETBV /
// arch_prctl for the OS's consent to save the wider register state).
//
// Source: Intel SDM vol. 2A, CPUID leaves 0 and 7; Linux arch_prctl(ARCH_REQ_XCOMP_PERM)
// for AMX tile data.
#pragma once

#include <string>

namespace nexus {

struct CpuFeatures {
  bool avx2 = false;        // with FMA and F16C (x86-64-v3)
  bool avx512 = false;      // F, BW, VL, DQ, and the OS saves ZMM state
  bool avx512_vnni = false;
  bool avx_vnni = false;    // the VEX-encoded 256-bit VNNI
  bool amx_int8 = false;    // tiles usable: CPU has them and the OS granted them
  bool amd = false;         // vendor AuthenticAMD (CPUID leaf 0): tuning, not correctness

  std::string describe() const;  // e.g. "avx2 avx512 avx512_vnni"
};

// Detected once, on first use; thread-safe.
const CpuFeatures& cpu_features();

}  // namespace nexus
