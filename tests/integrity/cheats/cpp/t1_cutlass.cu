// expect: T1.cpp.vendor_library
#include <cutlass/gemm/device/gemm.h>
using Gemm = cutlass::gemm::device::Gemm<float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor, float, cutlass::layout::RowMajor>;
