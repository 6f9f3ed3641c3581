// Test kernel for the emulator: fp32 GEMM with BLOCK x BLOCK shared-memory tiles, one thread per
// output element (BLOCK = 32: 1024 threads per block), two barriers per K step; any M, N, K.
template <int BLOCK>
__global__ void sgemm_smem_tiling(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float sA[BLOCK][BLOCK];   // BLOCK x BLOCK tile of A (row-major)
    __shared__ float sB[BLOCK][BLOCK];   // BLOCK x BLOCK tile of B (row-major)
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * BLOCK + ty, col = blockIdx.x * BLOCK + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        sA[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.f;
        sB[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < BLOCK; ++k) acc += sA[ty][k] * sB[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
