// RAII owners of device memory (cudaMalloc) and pinned host memory
// (cudaMallocHost, for asynchronous copies). Sizes are in elements of T.
// Move-only; the destructor frees and never throws (an error at free time
// has no one to report to).
#pragma once

#include <cstddef>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace nexus::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { resize(n); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Frees, then allocates n elements (contents undefined). n = 0 frees only.
  // cudaMalloc aligns to at least 256 bytes, which the vector loads rely on.
  void resize(size_t n) {
    release();
    if (n == 0) return;
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    p_ = static_cast<T*>(p);
    n_ = n;
  }
  void upload(const T* host, size_t n, size_t offset = 0) {
    if (offset + n > n_) throw Error("DeviceBuffer::upload past the end");
    CUDA_CHECK(cudaMemcpy(p_ + offset, host, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  void download(T* host, size_t n, size_t offset = 0) const {
    if (offset + n > n_) throw Error("DeviceBuffer::download past the end");
    CUDA_CHECK(cudaMemcpy(host, p_ + offset, n * sizeof(T), cudaMemcpyDeviceToHost));
  }

  T* get() { return p_; }
  const T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  void release() noexcept {
    if (p_) (void)cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t n) { resize(n); }
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void resize(size_t n) {
    release();
    if (n == 0) return;
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, n * sizeof(T)));
    p_ = static_cast<T*>(p);
    n_ = n;
  }
  T* get() { return p_; }
  const T* get() const { return p_; }
  T& operator[](size_t i) { return p_[i]; }
  size_t size() const { return n_; }

 private:
  void release() noexcept {
    if (p_) (void)cudaFreeHost(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace nexus::cuda
