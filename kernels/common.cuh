// common.cuh: the one header every kernel includes.
//
// What is here: u32, the fp16 types, cdiv, the FP32 steps' edge helpers (load_or_zero, ...), and
// every inline-PTX wrapper the course uses, one thin wrapper per instruction, named after it. Each
// wrapper has a CPU twin of the same name and signature in namespace emu:: (gemmlab/runtime/emulator/),
// used when GEMMLAB_EMULATOR is defined.
//
// Arch: ldmatrix and mma.m16n8k8 (f16) need sm_75 (Turing). mma.m16n8k16, the TF32 mma and
// cp.async need sm_80
// (Ampere). Those wrappers are plain inline functions: a kernel that never calls them still
// compiles for sm_75; one that does fails in ptxas with "requires sm_80", which is the message
// we want.
//
// Fragment layouts (which lane holds which element) are in the PTX ISA, "Matrix Fragments for
// mma.m16n8k8 / mma.m16n8k16" and "ldmatrix"; gemmlab/chapters/layouts.py is the tested Python twin.
#pragma once

typedef unsigned int u32;

#ifndef GEMMLAB_EMULATOR
#include <cuda_fp16.h>  // __half, half2, __float2half, ...; the emulator's shim provides its own
#endif

// Ceiling division: how many tiles of size b cover a.
__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------------------------
// Edges: the FP32 steps (sgemm/03 on) stage tiles that may cross the edge of a matrix. Outside
// it they load zeros, which add nothing to a dot product, and store nothing. These helpers keep
// that bookkeeping out of the kernels, so that each step's diff shows its idea.
// ---------------------------------------------------------------------------------------------

// src[row][col] of a rows x cols row-major matrix, or 0 outside it.
__device__ __forceinline__ float load_or_zero(const float* src, int row, int col, int rows, int cols) {
    return (row < rows && col < cols) ? src[row * cols + col] : 0.0f;
}

// Writes v to dst[row][col] of a rows x cols row-major matrix when that element is inside it.
__device__ __forceinline__ void store_if_inside(float* dst, int row, int col, int rows, int cols, float v) {
    if (row < rows && col < cols) dst[row * cols + col] = v;
}

// The 4 floats src[row][col .. col+3] of a rows x cols row-major matrix, zeros outside it: one
// 16-byte load when `vec` (cols % 4 == 0) and all 4 are inside, else guarded scalar loads.
__device__ __forceinline__ float4 load_float4_guarded(const float* src, int row, int col, int rows,
                                                      int cols, bool vec) {
    const float* p = src + row * cols + col;
    if (vec && row < rows && col + 4 <= cols) return *reinterpret_cast<const float4*>(p);
    const bool in = row < rows;
    return make_float4(in && col + 0 < cols ? p[0] : 0.0f, in && col + 1 < cols ? p[1] : 0.0f,
                       in && col + 2 < cols ? p[2] : 0.0f, in && col + 3 < cols ? p[3] : 0.0f);
}

// Writes v to dst[row][col .. col+3] of a rows x cols row-major matrix, skipping what is outside.
__device__ __forceinline__ void store_float4_guarded(float* dst, int row, int col, int rows, int cols,
                                                     bool vec, float4 v) {
    float* p = dst + row * cols + col;
    if (row >= rows) return;
    if (vec && col + 4 <= cols) {
        *reinterpret_cast<float4*>(p) = v;
        return;
    }
    if (col + 0 < cols) p[0] = v.x;
    if (col + 1 < cols) p[1] = v.y;
    if (col + 2 < cols) p[2] = v.z;
    if (col + 3 < cols) p[3] = v.w;
}

#ifndef GEMMLAB_EMULATOR
// The 32-bit shared-window address that ldmatrix and cp.async take in their [..] operand.
__device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}
#else
using emu::smem_u32;
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

// 3xTF32's Inf and NaN (sgemm/12, fused/05 to 08). Their split, big = tf32_round(x), small = x - big,
// makes an Inf's small part NaN (Inf - Inf), so the tensor-core sum of every output whose dot product
// meets an Inf or NaN input (or a finite input that rounds to Inf, or finite products that overflow
// both ways) ends NaN. The split stays three instructions (clamping big in it kept Inf in small but
// cost 10-35%: lab/inf-clamp); the epilogue repairs instead. Once a thread has stored its outputs,
// any_nan tests its accumulators (one FSETP each, chained, and one branch, almost never taken); only
// then does repair_nans read back each output it stored and replace a NaN by the plain fp32 dot
// product of its row of X and column of Y, FMAs in order of k from global memory: Inf, -Inf or NaN
// as FFMA and float64 give them.
template <int N>
__device__ __forceinline__ bool any_nan(const float* v) {
    bool nan = false;
#pragma unroll
    for (int q = 0; q < N; ++q) nan |= isnan(v[q]);
    return nan;
}

// The slow path: each output this thread stored that is NaN, recomputed in fp32 as its row of X
// (rows x inner) times its column of Y (inner x cols). The outputs are where the mma layouts put
// accumulator e = (i * tiles_n + j) * 4 + q of lane (g, t): row warp_row + g + 16 i + 8 (q / 2), column
// warp_col + 2 t + 8 j + q % 2 (mma.sync: acc[i][j][q]; wgmma: i = 0, acc[e]); count of them.
// Ordinary loads, not __ldg: X may be data this launch wrote (the fused steps' T, once the phase's
// synchronisation has made it visible).
__device__ __forceinline__ void repair_nans(float* out, const float* X, const float* Y, int rows, int cols, int inner,
                                            int warp_row, int warp_col, int count, int tiles_n) {
    const int row0 = warp_row + threadIdx.x % 32 / 4, col0 = warp_col + threadIdx.x % 4 * 2;  // g, 2 t
    for (int e = 0; e < count; ++e) {
        const int row = row0 + e / (tiles_n * 4) * 16 + e % 4 / 2 * 8, col = col0 + e / 4 % tiles_n * 8 + e % 2;
        if (row >= rows || col >= cols || !isnan(out[row * cols + col])) continue;
        float s = 0.0f;
        const float* y = Y + col;
        for (int k = 0; k < inner; ++k, y += cols) s = fmaf(X[row * inner + k], *y, s);
        out[row * cols + col] = s;
    }
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
// Named barriers: a block has 16; __syncthreads() is barrier 0 over every thread. bar.sync id, count
// waits until `count` threads (a multiple of 32, whole warps) have arrived at barrier `id`, so groups
// of warps that share nothing with the rest of the block can synchronise among themselves.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void bar_sync(int id, int count) {
#ifdef GEMMLAB_EMULATOR
    emu::bar_sync(id, count);
#else
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(count) : "memory");
#endif
}

// ---------------------------------------------------------------------------------------------
// Scoped memory ordering at GPU scope (sm_70 and newer), for grid_barrier below. A release makes
// this thread's earlier writes, and those it has seen (its block's, after a __syncthreads), visible
// to any thread that acquires the value it wrote; no full fence (__threadfence) is needed.
// ---------------------------------------------------------------------------------------------

// sm_70; old = *p, *p += v as one atomic with release semantics at GPU scope; returns old.
__device__ __forceinline__ u32 atom_add_release_gpu(u32* p, u32 v) {
#ifdef GEMMLAB_EMULATOR
    return emu::atom_add_release_gpu(p, v);
#else
    u32 old;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
#endif
}

// sm_70; *p += v, relaxed, at GPU scope (nobody waits for the old value).
__device__ __forceinline__ void atom_add_relaxed_gpu(u32* p, u32 v) {
#ifdef GEMMLAB_EMULATOR
    emu::atom_add_relaxed_gpu(p, v);
#else
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;\n" :: "l"(p), "r"(v) : "memory");
#endif
}

// sm_70; *p with acquire semantics at GPU scope: later reads see what the releasing writer saw.
__device__ __forceinline__ u32 ld_acquire_gpu(const u32* p) {
#ifdef GEMMLAB_EMULATOR
    return emu::ld_acquire_gpu(p);
#else
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
#endif
}

// sm_70; *p read without ordering (many such reads may be in flight), and the fence that turns the relaxed
// reads before it into acquires: the acquire pattern of the PTX memory model (wait_counters below).
__device__ __forceinline__ u32 ld_relaxed_gpu(const u32* p) {
#ifdef GEMMLAB_EMULATOR
    return emu::ld_relaxed_gpu(p);
#else
    u32 v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
#endif
}
__device__ __forceinline__ void fence_acq_rel_gpu() {
#ifdef GEMMLAB_EMULATOR
    emu::fence_acq_rel_gpu();
#else
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
#endif
}

// sm_70; the calling warp waits until counters[0 .. count) are all nonzero, then takes take(j) from
// counter j (fused/08: a counter per tile of T holds the reads still to come; hgemm/12: a flag per part
// of a shared tile). The lanes poll 32 at a
// time with relaxed reads, one L2 round trip per sweep; a fence in each lane then makes what it saw an
// acquire, and the warp's barrier passes that on to every lane.
template <typename Take>
__device__ __forceinline__ void wait_counters(u32* counters, int count, Take take) {
    const int lane = threadIdx.x % 32;
    for (;;) {
        bool ready = true;
        for (int j = lane; j < count; j += 32) ready = ready && ld_relaxed_gpu(&counters[j]) != 0;
        if (__all_sync(0xffffffffu, ready)) break;
#ifdef GEMMLAB_EMULATOR
        emu::poll_pause(__LINE__);  // the counters may wait on this block's other threads
#endif
    }
    fence_acq_rel_gpu();
    __syncwarp();
    for (int j = lane; j < count; j += 32) atom_add_relaxed_gpu(&counters[j], 0u - take(j));
}

// ---------------------------------------------------------------------------------------------
// grid_barrier: the fused steps' (chapter 8) wait between two phases of one persistent launch.
// One word, sync[0], zeroed once. Thread 0 of each block adds to it: block 0 adds 2^31 - (G - 1),
// the other G - 1 blocks add 1, so once all G have arrived the word has grown by exactly 2^31: its
// top bit has flipped and its low bits are back where they were. Each block waits until it sees the
// top bit differ from the value its own add returned. Nothing is reset, so the next barrier (or the
// next launch, with any G) starts from whatever the word holds. One atomic per block and one
// polling read to see the flip: the release on the add and the acquire on the read carry every
// block's writes of phase 1 to every block's reads of phase 2. Correct only when all gridDim.x
// blocks are resident at once (the runtime sizes the grid so): a block waiting for one that never
// starts waits forever.
// ---------------------------------------------------------------------------------------------
inline __device__ void grid_barrier(u32* sync) {
    __syncthreads();  // this block has finished its phase (and thread 0 has seen its writes)
    if (threadIdx.x == 0) {
        const u32 add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        const u32 old = atom_add_release_gpu(sync, add);
        while (((old ^ ld_acquire_gpu(sync)) & 0x80000000u) == 0) {
        }
    }
    __syncthreads();  // the block's other threads read phase 2's inputs only after thread 0's acquire
}

// ---------------------------------------------------------------------------------------------
// Hopper (sm_90a): mbarriers, TMA and wgmma, for the hgemm track's step 08.
//
// An mbarrier is a 64-bit word in shared memory that counts arrivals and bytes. It completes a
// phase when `count` threads have arrived and every byte it was told to expect (expect_tx) has
// landed; then its phase bit flips and it starts over. A waiter names the parity of the phase it
// waits for: 0 for the first completion, 1 for the second, and so on alternating. Waiting for
// parity 1 on a fresh barrier returns at once (the phase "before" the first counts as done),
// which is how a producer starts on empty buffers.
// TMA (cp.async.bulk.tensor) copies a whole box of a 2-D tensor from global to shared memory,
// issued by one thread; the tensor map says where the tensor is, its shape and row stride, the
// box, and the shared-memory swizzle. Coordinates are (column, row), innermost first; elements of
// the box outside the tensor arrive as zeros, and the box's full size counts toward expect_tx.
// wgmma: the 128 threads of a warpgroup (4 consecutive warps) multiply a 64 x N tile: A and B
// are read from shared memory through 64-bit descriptors, D lives in registers. It is
// asynchronous: fence before the first one, commit a group, wait for groups to retire before
// reading D or overwriting the shared tiles.
// 128-byte swizzle (TMA's SWIZZLE_128B, wgmma's layout type 1): rows of 128 bytes, in atoms of 8
// rows (1024 bytes, which must start 1024-byte aligned); the 16-byte chunk c of row r of an
// atom is stored at chunk c ^ (r % 8): the XOR of address bits 4-6 with bits 7-9.
// ---------------------------------------------------------------------------------------------

// A tensor map (CUtensorMap): 128 opaque bytes made on the host by gemmlab/runtime/tma.py and passed in
// global memory (on the CPU the emulator reads its own encoding of the same fields).
struct __align__(64) TmaMap { unsigned long long opaque[16]; };

#ifndef GEMMLAB_EMULATOR
// sm_90; count: the arrivals that complete a phase.
__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(count) : "memory");
}

// sm_90; makes the initialised mbarriers visible to the TMA unit (then __syncthreads() for the threads).
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// sm_90; one arrival.
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_u32(bar)) : "memory");
}

// sm_90; one arrival if `pred`, by a predicated instruction rather than a branch: a branch on a
// thread's index while wgmmas are in flight makes ptxas serialize them (its warning C7518).
__device__ __forceinline__ void mbarrier_arrive_if(unsigned long long* bar, bool pred) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n"
                 :: "r"(smem_u32(bar)), "r"((u32)pred) : "memory");
}

// sm_90; one arrival, and `bytes` more bytes to wait for in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned long long* bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}

// sm_90; returns once the phase of parity `parity` has completed (try_wait in a loop).
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, u32 parity) {
    asm volatile("{\n.reg .pred ready;\nRETRY:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
                 "@!ready bra RETRY;\n}\n" :: "r"(smem_u32(bar)), "r"(parity) : "memory");
}

// sm_90; the tensor map was written by the host before the launch: order this thread's TMA reads
// of it after that (needed for a map in global memory rather than a kernel parameter).
__device__ __forceinline__ void tma_map_acquire(const TmaMap* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" :: "l"(map) : "memory");
}

// sm_90; one thread: copy the box at (col, row) of `map`'s tensor to dst (1024-byte aligned for
// a swizzled map); the bytes are counted on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaMap* map, int col, int row, unsigned long long* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar)) : "memory");
}

// sm_90a; the whole warpgroup: hand the registers over to the following wgmmas.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// sm_90a; the whole warpgroup: the wgmmas issued since the last commit form one group.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

// sm_90a; the whole warpgroup: wait until at most N committed groups are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }

// The compiler does not know that wgmma writes d in the background: this empty asm "uses and
// redefines" every accumulator, so no read or write of d moves across it (put one after each wait).
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
// The same for A fragments held in registers: their values are computed before this point, so the
// compiler does not move that arithmetic in between the wgmmas that read them (where it would have
// to wait for each wgmma before the next: ptxas warning C7519).
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(u32 (&a)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i]) :: "memory");
}

// sm_90a; the whole warpgroup: release registers down to R per thread (a producer) or claim up
// to R (a consumer); the register file is shared out again among the warpgroups of the block.
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(R)); }
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(R)); }

// The 64-bit wgmma descriptor of a 128-byte-swizzled tile at p (shared memory): start address,
// leading and stride byte offsets (lbo, sbo; each >> 4), layout type 1 (128B swizzle) in bits 62-63.
// K-major tile (A): rows of 64 halves, sbo = 1024 (from one 8-row atom to the next), lbo unused.
// N-major tile (B): rows of 64 columns, one row per k; sbo = 1024 (from k 0-7 to k 8-15), lbo =
// the distance between two 64-column blocks of the tile.
__device__ __forceinline__ unsigned long long wgmma_desc_sw128(const void* p, u32 lbo, u32 sbo) {
    return (unsigned long long)((smem_u32(p) & 0x3ffff) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
           (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}
#else
using emu::mbarrier_init;
using emu::fence_barrier_init;
using emu::mbarrier_arrive;
using emu::mbarrier_arrive_if;
using emu::mbarrier_arrive_expect_tx;
using emu::mbarrier_wait;
using emu::tma_map_acquire;
using emu::tma_load_2d;
using emu::wgmma_fence;
using emu::wgmma_commit;
using emu::wgmma_wait;
using emu::wgmma_fence_operands;
using emu::setmaxnreg_dec;
using emu::setmaxnreg_inc;
using emu::wgmma_desc_sw128;
#endif

// wgmma's accumulator layout (m64nN, fp32): warp w of the warpgroup holds rows 16w .. 16w + 15;
// for each 8-column block j, thread lane holds d[4j + 0..3] = (r, c), (r, c + 1), (r + 8, c),
// (r + 8, c + 1) with r = 16w + lane / 4, c = 8j + 2 (lane % 4): mma.m16n8's layout, N / 8 times.

// sm_90a; D (64 x 128, fp32) += A (64 x 16, fp16, K-major in shared memory, descriptor a) *
// B (16 x 128, fp16, N-major in shared memory, descriptor b: imm-trans-b = 1), for the 128 threads of
// a warpgroup. d: this thread's 64 accumulators, see the layout above.
__device__ __forceinline__ void wgmma_m64n128k16_f32(float (&d)[64], unsigned long long a, unsigned long long b) {
#ifdef GEMMLAB_EMULATOR
    emu::wgmma_m64k16_f32<128>(d, a, b);
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "n"(1));
#endif
}

// sm_90a; D (64 x 256, fp32) += A (64 x 16, fp16, K-major in shared memory, descriptor a) *
// B (16 x 256, fp16, N-major in shared memory, descriptor b: imm-trans-b = 1), for the 128 threads of
// a warpgroup. d: this thread's 128 accumulators, see the layout above.
__device__ __forceinline__ void wgmma_m64n256k16_f32(float (&d)[128], unsigned long long a, unsigned long long b) {
#ifdef GEMMLAB_EMULATOR
    emu::wgmma_m64k16_f32<256>(d, a, b);
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                 " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                 " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                 " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                 " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
                 "%128, %129, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(a), "l"(b), "n"(1));
#endif
}

// sm_90; this thread's ordinary shared-memory stores become visible to the async proxy (wgmma's
// and TMA's reads): put one after writing a tile that a wgmma will read, before the barrier.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef GEMMLAB_EMULATOR
    emu::fence_proxy_async();
#else
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// sm_90; this thread's ordinary global stores, ordered before later reads of the same bytes by the
// async proxy (TMA): fused/07 writes T with st.global and reads it back by TMA after a grid barrier.
__device__ __forceinline__ void fence_proxy_async_global() {
#ifdef GEMMLAB_EMULATOR
    emu::fence_proxy_async();
#else
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
#endif
}

// sm_90a; D (64 x N, fp32) = A (64 x 8, TF32, in registers) * B (8 x N, TF32, K-major in shared memory,
// 128-byte swizzled, descriptor b) + (scale_d ? D : 0), for the 128 threads of a warpgroup; N = 32, 64.
// a: this thread's 4 registers of A, warp w of the warpgroup holding rows 16w .. 16w + 15 in
// mma.m16n8k8's layout (a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)); d: N / 2
// accumulators, the layout above. TF32 has no transposed form: B must be K-major (each of its N
// columns one 128-byte row of k).
__device__ __forceinline__ void wgmma_m64n32k8_tf32(float (&d)[16], const u32 (&a)[4], unsigned long long b, int scale_d) {
#ifdef GEMMLAB_EMULATOR
    emu::wgmma_m64k8_tf32<32>(d, a, b, scale_d);
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15},"
                 " {%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
#endif
}

__device__ __forceinline__ void wgmma_m64n64k8_tf32(float (&d)[32], const u32 (&a)[4], unsigned long long b, int scale_d) {
#ifdef GEMMLAB_EMULATOR
    emu::wgmma_m64k8_tf32<64>(d, a, b, scale_d);
#else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},"
                 " {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d));
#endif
}

// ---------------------------------------------------------------------------------------------
// Thread-block clusters (sm_90), for the hgemm track's step 10. A kernel declared with
// __cluster_dims__(X, Y, Z) runs its blocks in clusters of X * Y * Z that the hardware places on
// the SMs of one GPC at the same time. Each block (CTA) of a cluster has a rank, 0 .. size - 1,
// and can reach the shared memory of the others (distributed shared memory): `mapa` turns an
// address of this CTA's window into the same offset in CTA `rank`'s, which mbarrier operations and
// TMA accept in the shared::cluster space. A CTA must not exit while another may still write its
// shared memory or arrive on its mbarriers: end with cluster_sync().
// ---------------------------------------------------------------------------------------------
#ifndef GEMMLAB_EMULATOR
// sm_90; this CTA's rank in its cluster (x fastest, as blockIdx within the cluster).
__device__ __forceinline__ u32 cluster_ctarank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// sm_90; every thread of every CTA of the cluster: wait until all have arrived. Release/acquire:
// what a thread wrote before (shared memory of any CTA, mbarrier arrivals) is seen after by all.
// Not .aligned: the threads of a warp may arrive from different branches.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// sm_90; one arrival on the mbarrier at bar's offset in the shared memory of CTA `cta` of this
// cluster (this CTA's own when cta is its rank). The default semantics (release at CTA scope), as
// CUTLASS's ClusterBarrier: what it orders is the stage's reads by wgmma, already complete after
// wgmma_wait. `.release.cluster` would put a MEMBAR.ALL.GPU before every arrival (seen in the SASS).
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned long long* bar, u32 cta) {
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
                 :: "r"(smem_u32(bar)), "r"(cta) : "memory");
}

// sm_90; as mbarrier_wait, acquiring at cluster scope: for a barrier that other CTAs arrive on.
__device__ __forceinline__ void mbarrier_wait_cluster(unsigned long long* bar, u32 parity) {
    asm volatile("{\n.reg .pred ready;\nRETRY:\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 ready, [%0], %1;\n"
                 "@!ready bra RETRY;\n}\n" :: "r"(smem_u32(bar)), "r"(parity) : "memory");
}

// sm_90; one thread: copy the box at (col, row) of `map`'s tensor to dst in the shared memory of
// every CTA of the cluster whose bit is set in cta_mask (the same offset in each), and count the
// bytes on the mbarrier at bar's offset in each of those CTAs. One read from L2, several writes.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TmaMap* map, int col, int row,
                                                      unsigned long long* bar, u32 cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(col), "r"(row), "r"(smem_u32(bar)), "h"((unsigned short)cta_mask)
                 : "memory");
}
#else
using emu::cluster_ctarank;
using emu::cluster_sync;
using emu::mbarrier_arrive_cluster;
using emu::mbarrier_wait_cluster;
using emu::tma_load_2d_multicast;
#endif

// ---------------------------------------------------------------------------------------------
// TMA stores (sm_90), for the hgemm track's step 10. One thread copies a box of shared memory to a
// 2-D tensor in global memory (cp.async.bulk.tensor, global <- shared::cta): the tensor map gives the
// box and the swizzle of its layout in shared memory, and elements of the box outside the tensor are
// not written (the M and N edges clip themselves). The copy is asynchronous and tracked per thread in
// bulk groups: bulk_commit_group() closes the stores issued so far into a group;
// bulk_wait_group_read<N>() returns when at most N of this thread's groups may still be reading their
// shared memory (older buffers may be written again); bulk_wait_group<N>() when at most N are still
// writing global memory. The threads' ordinary stores into the buffer reach the TMA unit (the async
// proxy) only after each writer's fence_proxy_async(), before the barrier that hands the buffer to the
// issuing thread.
// ---------------------------------------------------------------------------------------------
#ifndef GEMMLAB_EMULATOR
// sm_90; one thread: store the box at src (1024-byte aligned for a swizzled map) to (col, row) of `map`'s tensor.
__device__ __forceinline__ void tma_store_2d(const TmaMap* map, const void* src, int col, int row) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 :: "l"(map), "r"(col), "r"(row), "r"(smem_u32(src)) : "memory");
}

// sm_90; this thread's bulk copies issued since the last commit form one group.
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// sm_90; wait until at most N of this thread's groups are still reading their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
}

// sm_90; wait until at most N of this thread's groups are still running (their writes not yet done).
template <int N>
__device__ __forceinline__ void bulk_wait_group() { asm volatile("cp.async.bulk.wait_group %0;\n" :: "n"(N) : "memory"); }
#else
using emu::tma_store_2d;
using emu::bulk_commit_group;
using emu::bulk_wait_group_read;
using emu::bulk_wait_group;
#endif
