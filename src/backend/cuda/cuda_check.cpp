#include "backend/cuda/cuda_check.h"

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

void require_launch(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

}  // namespace oscar::cuda
