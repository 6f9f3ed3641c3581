// common.cuh: the one header every kernel includes.
//
// What is here: u32, the fp16 types, cdiv, and every inline-PTX wrapper the course uses, one thin
// wrapper per instruction, named after it. Each wrapper has a CPU twin of the same name and
// signature in namespace emu:: (gemmlab/emulator/), used when GEMMLAB_EMULATOR is defined.
//
// Arch: ldmatrix and mma.m16n8k8 (f16) need sm_75 (Turing). mma.m16n8k16, the TF32 mma and
// cp.async need sm_80
// (Ampere). Those wrappers are plain inline functions: a kernel that never calls them still
// compiles for sm_75; one that does fails in ptxas with "requires sm_80", which is the message
// we want.
//
// Fragment layouts (which lane holds which element) are in the PTX ISA, "Matrix Fragments for
// mma.m16n8k8 / mma.m16n8k16" and "ldmatrix"; gemmlab/layouts.py is the tested Python twin.
#pragma once

typedef unsigned int u32;

#ifndef GEMMLAB_EMULATOR
#include <cuda_fp16.h>  // __half, half2, __float2half, ...; the emulator's shim provides its own
#endif

// Ceiling division: how many tiles of size b cover a.
__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

#ifndef GEMMLAB_EMULATOR
// The 32-bit shared-window address that ldmatrix and cp.async take in their [..] operand.
__device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}
#endif

// ---------------------------------------------------------------------------------------------
// ldmatrix: load 8x8 b16 matrices from shared memory into registers, shuffled into the mma
// fragment layout. Each of the 8 rows of a matrix is 16 contiguous bytes; lane 8*j + r gives the
// address of row r of matrix j. Afterwards register j of lane l holds row l/4, columns
// 2*(l%4) and 2*(l%4)+1 of matrix j (.trans: row and column swapped).
// ---------------------------------------------------------------------------------------------

// sm_75; p: this lane's 16-byte-aligned row in shared memory; lanes 0-7 give the rows.
__device__ __forceinline__ void ldmatrix_x1(u32& r0, const void* p) {
#ifdef GEMMLAB_EMULATOR
    emu::ldmatrix_x1(r0, p);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r0) : "r"(smem_u32(p)));
#endif
}

// sm_75; p: this lane's 16-byte-aligned row in shared memory; lanes 0-15 give the rows.
__device__ __forceinline__ void ldmatrix_x2(u32& r0, u32& r1, const void* p) {
#ifdef GEMMLAB_EMULATOR
    emu::ldmatrix_x2(r0, r1, p);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1) : "r"(smem_u32(p)));
#endif
}

// sm_75; p: this lane's 16-byte-aligned row in shared memory; all 32 lanes give rows.
__device__ __forceinline__ void ldmatrix_x4(u32& r0, u32& r1, u32& r2, u32& r3, const void* p) {
#ifdef GEMMLAB_EMULATOR
    emu::ldmatrix_x4(r0, r1, r2, r3, p);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
#endif
}

// sm_75; transposed; p: this lane's 16-byte-aligned row in shared memory; lanes 0-7 give rows.
__device__ __forceinline__ void ldmatrix_x1_trans(u32& r0, const void* p) {
#ifdef GEMMLAB_EMULATOR
    emu::ldmatrix_x1_trans(r0, p);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r0) : "r"(smem_u32(p)));
#endif
}

// sm_75; transposed; p: this lane's 16-byte-aligned row in shared memory; lanes 0-15 give rows.
__device__ __forceinline__ void ldmatrix_x2_trans(u32& r0, u32& r1, const void* p) {
#ifdef GEMMLAB_EMULATOR
    emu::ldmatrix_x2_trans(r0, r1, p);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1) : "r"(smem_u32(p)));
#endif
}

// sm_75; transposed; p: this lane's 16-byte-aligned row in shared memory; all 32 lanes give rows.
__device__ __forceinline__ void ldmatrix_x4_trans(u32& r0, u32& r1, u32& r2, u32& r3,
                                                  const void* p) {
#ifdef GEMMLAB_EMULATOR
    emu::ldmatrix_x4_trans(r0, r1, r2, r3, p);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_u32(p)));
#endif
}

// ---------------------------------------------------------------------------------------------
// mma.sync: D = A * B + C for one warp, A row-major (M x K), B column-major (K x N), f16 inputs
// packed two per u32. All 32 lanes must call it with their own fragments.
// ---------------------------------------------------------------------------------------------

// sm_75; 16x8x8, fp32 accumulators; a: 2 regs (4 halves), b: 1 reg (2 halves), c/d: 4 floats.
__device__ __forceinline__ void mma_m16n8k8_f32(float (&d)[4], const u32 (&a)[2],
                                                const u32 (&b)[1], const float (&c)[4]) {
#ifdef GEMMLAB_EMULATOR
    emu::mma_m16n8k8_f32(d, a, b, c);
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// sm_80; 16x8x16, fp32 accumulators; a: 4 regs (8 halves), b: 2 regs (4 halves), c/d: 4 floats.
__device__ __forceinline__ void mma_m16n8k16_f32(float (&d)[4], const u32 (&a)[4],
                                                 const u32 (&b)[2], const float (&c)[4]) {
#ifdef GEMMLAB_EMULATOR
    emu::mma_m16n8k16_f32(d, a, b, c);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// sm_75; 16x8x8, fp16 accumulators; a: 2 regs, b: 1 reg, c/d: 2 regs (4 halves).
__device__ __forceinline__ void mma_m16n8k8_f16(u32 (&d)[2], const u32 (&a)[2],
                                                const u32 (&b)[1], const u32 (&c)[2]) {
#ifdef GEMMLAB_EMULATOR
    emu::mma_m16n8k8_f16(d, a, b, c);
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 "
                 "{%0, %1}, {%2, %3}, {%4}, {%5, %6};\n"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(c[0]), "r"(c[1]));
#endif
}

// sm_80; 16x8x16, fp16 accumulators; a: 4 regs, b: 2 regs, c/d: 2 regs (4 halves).
__device__ __forceinline__ void mma_m16n8k16_f16(u32 (&d)[2], const u32 (&a)[4],
                                                 const u32 (&b)[2], const u32 (&c)[2]) {
#ifdef GEMMLAB_EMULATOR
    emu::mma_m16n8k16_f16(d, a, b, c);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
                 "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "r"(c[0]), "r"(c[1]));
#endif
}

// ---------------------------------------------------------------------------------------------
// TF32: fp32's 8-bit exponent with a 10-bit mantissa, in a 32-bit register whose low 13 bits are
// zero. The tensor cores multiply two TF32 values exactly and add in fp32 (sm_80 and newer).
// ---------------------------------------------------------------------------------------------

// x rounded to the nearest TF32 (ties away from zero), as the bits of an fp32: what
// cvt.rna.tf32.f32 computes, in two integer instructions (add half of the 13 dropped bits' range
// to the magnitude, then drop them; a carry into the exponent rounds up, to Inf at the top).
// Not a PTX wrapper: on sm_90 ptxas expands cvt.rna.tf32.f32 into four instructions with a test
// for Inf and NaN, which a kernel that rounds every operand it reads cannot afford. The price:
// NaNs are not kept. 0x7fc00000 stays NaN, but the GPU's own NaN, 0x7fffffff, carries into the
// sign bit and becomes -0, so a caller must let NaN through another path (05_tf32x3: small).
__device__ __forceinline__ u32 tf32_round(float x) {
    return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}

// sm_80; 16x8x8, TF32 inputs, fp32 accumulators; a: 4 regs (a0 (g, t), a1 (g+8, t), a2 (g, t+4),
// a3 (g+8, t+4)), b: 2 regs (b0 (k t, col g), b1 (k t+4, col g)), c/d: 4 floats as for f16.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const u32 (&a)[4],
                                                 const u32 (&b)[2], const float (&c)[4]) {
#ifdef GEMMLAB_EMULATOR
    emu::mma_m16n8k8_tf32(d, a, b, c);
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// ---------------------------------------------------------------------------------------------
// cp.async: global -> shared copies that bypass registers and run in the background. Copies
// issued since the last commit form one group; wait_group<N> blocks until at most N groups are
// still in flight. Other threads' copies are visible only after a __syncthreads() as well.
// ---------------------------------------------------------------------------------------------

// sm_80; smem_dst and gmem_src 16-byte aligned; reads src_bytes (0..16) and zero-fills the rest.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) {
#ifdef GEMMLAB_EMULATOR
    emu::cp_async_16(smem_dst, gmem_src, src_bytes);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_u32(smem_dst)), "l"(gmem_src), "r"(src_bytes) : "memory");
#endif
}

// sm_80; closes the group of this thread's cp.async copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#ifdef GEMMLAB_EMULATOR
    emu::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// sm_80; waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
#ifdef GEMMLAB_EMULATOR
    emu::cp_async_wait_group<N>();
#else
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
#endif
}

// sm_80; waits for all of this thread's cp.async copies, committed or not.
__device__ __forceinline__ void cp_async_wait_all() {
#ifdef GEMMLAB_EMULATOR
    emu::cp_async_wait_all();
#else
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// ---------------------------------------------------------------------------------------------
// grid_barrier: the fused steps' (chapter 8) wait between two phases of one persistent launch.
// sync[0] counts the blocks that have arrived, sync[1] counts completed barriers (the generation);
// both start at zero, and the last block to arrive resets the count, so no host-side reset is
// needed between barriers or launches. Every block of the grid waits here until all have arrived;
// writes before it are visible to every block after it. Correct only when all gridDim.x blocks are
// resident at once (the runtime sizes the grid so): a block waiting for one that never starts
// waits forever.
// ---------------------------------------------------------------------------------------------
inline __device__ void grid_barrier(u32* sync) {
    __syncthreads();  // this block has finished its phase
    if (threadIdx.x == 0) {
        volatile u32* generation = sync + 1;
        const u32 gen = *generation;  // read before arriving: it cannot change until we arrive
        __threadfence();              // our writes are visible GPU-wide before we arrive
        if (atomicAdd(sync, 1u) == gridDim.x - 1) {
            atomicExch(sync, 0u);     // the last to arrive resets the count for the next barrier
            __threadfence();
            atomicAdd(sync + 1, 1u);  // and releases the others
        } else {
            while (*generation == gen) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}
