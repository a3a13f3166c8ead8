#include "backend/cuda/gemm.h"

#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/skinny_linear.h"
#include "util/error.h"

namespace oscar::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
}  // namespace

Gemm::Gemm(cudaStream_t stream) {
  check(cublasCreate(&handle_), "cublasCreate");
  check(cublasSetStream(handle_, stream), "cublasSetStream");
  stream_ = stream;
  workspace_.resize(kWorkspaceBytes);
  check(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()), "cublasSetWorkspace");
  check(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

void Gemm::linear(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t outputs,
                  int64_t inputs, float* y, bool accumulate) const {
  if (rows == 0) return;
  if (skinny_linear_supports(rows, inputs))
    return skinny_linear(x, rows, w, outputs, inputs, y, accumulate, stream_);
  cublas_linear(x, rows, w, outputs, inputs, y, accumulate);
}

void Gemm::linear_swiglu(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w,
                         int64_t inner, int64_t inputs, float* gate_up,
                         __nv_bfloat16* activation) const {
  if (rows == 0) return;
  if (skinny_linear_supports(rows, inputs))
    return skinny_linear_swiglu(x, rows, w, inner, inputs, activation, stream_);
  cublas_linear_swiglu(x, rows, w, inner, inputs, gate_up, activation);
}

void Gemm::cublas_linear_swiglu(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w,
                                int64_t inner, int64_t inputs, float* gate_up,
                                __nv_bfloat16* activation) const {
  if (rows == 0) return;
  cublas_linear(x, rows, w, 2 * inner, inputs, gate_up);
  launch_swiglu(gate_up, rows, inner, activation, stream_);
}

void Gemm::cublas_linear(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w,
                         int64_t outputs, int64_t inputs, float* y, bool accumulate) const {
  if (rows == 0) return;
  require(rows <= INT32_MAX && outputs <= INT32_MAX && inputs <= INT32_MAX,
          "cuBLAS: matrix of {} x {} x {} too large", rows, outputs, inputs);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // Column-major view: y^T [outputs x rows] = w [outputs x inputs] * x^T [inputs x rows].
  check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, int(outputs), int(rows), int(inputs),
                     &alpha, w, CUDA_R_16BF, int(inputs), x, CUDA_R_16BF, int(inputs), &beta, y,
                     CUDA_R_32F, int(outputs), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

}  // namespace oscar::cuda
