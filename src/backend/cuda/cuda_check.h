#pragma once
// Every CUDA runtime and cuBLAS call is checked: a failure throws oscar::Error naming the call
// and the runtime's message (library code never aborts).
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace oscar::cuda {

void check(cudaError_t status, const char* what);
void check(cublasStatus_t status, const char* what);
// After a kernel launch: the launch error (bad configuration, missing kernel image).
void check_launch(const char* kernel_name);

}  // namespace oscar::cuda
