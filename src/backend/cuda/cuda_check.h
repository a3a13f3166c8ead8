#pragma once
// Every CUDA runtime and cuBLAS call is checked: a failure throws oscar::Error naming the call
// and the runtime's message (library code never aborts).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace oscar::cuda {

void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);
// After a kernel launch: the launch error (bad configuration, missing kernel image).
void check_launch(const char* kernel_name);
// Raises `kernel`'s dynamic shared memory limit to `bytes` on the current device, once per device:
// the attribute is a device's, and the ranks of a tensor-parallel process run on several GPUs.
void allow_dynamic_shared_memory(const void* kernel, int bytes, const char* what);
// The current device's multiprocessor count.
int multiprocessor_count();
// A launcher's precondition, for .cu files (fmt's compile-time format checks do not build there).
void require_launch(bool condition, const std::string& message);

}  // namespace oscar::cuda
