#include "backend/cuda/cuda_check.h"

#include <mutex>
#include <set>
#include <tuple>

#include "util/error.h"

namespace oscar::cuda {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    fail("CUDA: {} failed: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    fail("cuBLAS: {} failed: {} ({})", what, cublasGetStatusString(status),
         cublasGetStatusName(status));
  }
}

void check_launch(const char* kernel_name) {
  check(cudaGetLastError(), kernel_name);
}

void allow_dynamic_shared_memory(const void* kernel, int bytes, const char* what) {
  static std::mutex mutex;
  static std::set<std::tuple<int, const void*, int>> done;  // (device, kernel, bytes)
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  const std::lock_guard lock(mutex);
  if (done.contains({device, kernel, bytes})) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), what);
  done.insert({device, kernel, bytes});
}

int multiprocessor_count() {
  int device = 0, multiprocessors = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(multiprocessors)");
  return multiprocessors;
}

void require_launch(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

}  // namespace oscar::cuda
