// The AVX2 model GEMM kernel beside the AVX-512 one: model_gemm_kernel.inc compiled with -mno-avx512f
// (reference/CMakeLists.txt adds this file only when the native ISA has AVX-512, so this CPU has AVX2 too).
#if defined(__AVX512F__) || !defined(__AVX2__)
#error "model_gemm_avx2.cpp must be compiled with AVX2 and without AVX-512 (-mno-avx512f)"
#endif
#define CALICO_GEMM_NS avx2_kernel
#include "model_gemm_kernel.inc"
