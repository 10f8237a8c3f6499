#include "engine/cuda/gemm.h"

#include <string>

#include "common/error.h"
#include "engine/cuda/cuda_check.h"

namespace gpufrac::engine {

CublasLtGemm::CublasLtGemm(uint64_t workspace_bytes)
    : workspace_(workspace_bytes, "the cuBLASLt workspace") {
  GPUFRAC_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtGemm::~CublasLtGemm() {
  for (auto& [shape, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.y_layout);
    cublasLtMatrixLayoutDestroy(plan.x_layout);
    cublasLtMatrixLayoutDestroy(plan.w_layout);
    cublasLtMatmulDescDestroy(plan.op);
  }
  if (handle_) cublasLtDestroy(handle_);
}

// Column-major view: y^T (n x m, ld n) = op(W^T as k x n, transposed) * (x^T, k x m, ld k).
const CublasLtGemm::Plan& CublasLtGemm::plan(int m, int n, int k, bool y_bf16) {
  auto key = std::make_tuple(m, n, k, y_bf16);
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;
  Plan p;
  GPUFRAC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  GPUFRAC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                      &transpose, sizeof transpose));
  GPUFRAC_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none));
  GPUFRAC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w_layout, CUDA_R_16BF, k, n, k));
  GPUFRAC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.x_layout, CUDA_R_16BF, k, m, k));
  GPUFRAC_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&p.y_layout, y_bf16 ? CUDA_R_16BF : CUDA_R_32F, n, m, n));

  cublasLtMatmulPreference_t preference = nullptr;
  GPUFRAC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  uint64_t workspace = workspace_.bytes();
  GPUFRAC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found_algos = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, p.op, p.w_layout, p.x_layout, p.y_layout, p.y_layout, preference, 1, &result,
      &found_algos);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found_algos == 0) {
    throw RuntimeFailure("cuBLASLt has no algorithm for a bf16 GEMM of m=" + std::to_string(m) +
                         " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void CublasLtGemm::run(const bf16* x, const bf16* w, void* y, bool y_bf16, int m, int n, int k,
                       cudaStream_t stream, bool accumulate) {
  if (m == 0) return;
  const Plan& p = plan(m, n, k, y_bf16);
  float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  GPUFRAC_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &one, w, p.w_layout, x, p.x_layout, &beta,
                                      y, p.y_layout, y, p.y_layout, &p.algo, workspace_.data(),
                                      workspace_.bytes(), stream));
}

}  // namespace gpufrac::engine
