// cuda_shim.h: lets an unmodified CUDA kernel compile and run on the CPU with g++.
//
// gemmlab/runtime/cpu.py compiles a kernel with `-include cuda_shim.h -DGEMMLAB_EMULATOR` and links it
// with runtime.cpp. Every CUDA thread of a block is a fiber on one OS thread; fibers switch only
// at __syncthreads() and at warp collectives, so everything else is plain optimised C++.
// __shared__ is `static thread_local`: a block runs on one OS thread, so that is block memory.
// The heavy parts (scheduler, context switch, argument mapping) live in runtime.cpp, compiled once.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

using std::isfinite;  // CUDA's device math has them unqualified
using std::isinf;
using std::isnan;

// ---------------------------------------------------------------------------------------------
// Keywords
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __cluster_dims__(...)  // gemmlab/runtime/cpu.py reads the cluster shape from the source (cluster_dims)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
// __restrict__ is native to g++. No __noinline__: libstdc++ 13 spells __attribute__((__noinline__)),
// which such a macro would break.

// ---------------------------------------------------------------------------------------------
// Vector types and built-in variables
// ---------------------------------------------------------------------------------------------
struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return {x, y, z}; }
};
struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(8) uint2 { unsigned x, y; };
struct __align__(16) uint4 { unsigned x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }

// __thread (not thread_local) so that reads compile to one %fs-relative load with no TLS wrapper.
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;
constexpr int warpSize = 32;

// Timing and traps a learner may write: clock64() counts nanoseconds of this CPU (a clock that only goes up, as
// the SM's counter; the numbers are no GPU's cycles); __trap() stops the kernel, which
// the emulator reports as "illegal instruction (__trap() ...)" with the thread and line, as a GPU stops the launch.
inline long long clock64() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
#define __trap() __builtin_trap()  // a macro, so the fault names the kernel's line

// ---------------------------------------------------------------------------------------------
// Math and bit intrinsics
// ---------------------------------------------------------------------------------------------
template <class A, class B> inline auto min(A a, B b) -> decltype(a + b) { return b < a ? b : a; }
template <class A, class B> inline auto max(A a, B b) -> decltype(a + b) { return a < b ? b : a; }
inline float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
inline float __expf(float a) { return std::exp(a); }
inline float __saturatef(float a) { return a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a); }
inline int __float2int_rn(float a) { return (int)std::nearbyint(a); }
inline int __float2int_rz(float a) { return (int)a; }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
inline unsigned __float_as_uint(float f) { unsigned v; std::memcpy(&v, &f, 4); return v; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline unsigned __brev(unsigned v) {
    v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
    v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
    v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
    return __builtin_bswap32(v);
}
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }  // cached in L2 only: the same in one memory
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline size_t __cvta_generic_to_shared(const void* p) { return (size_t)p; }

// Blocks run in parallel on several OS threads: atomics must be real atomics.
template <class T> inline T atomicAdd(T* p, T v) {
    if constexpr (std::is_floating_point<T>::value) {  // compare-and-swap on the bit pattern
        using Bits = typename std::conditional<sizeof(T) == 4, unsigned, unsigned long long>::type;
        Bits* q = reinterpret_cast<Bits*>(p);
        Bits old = __atomic_load_n(q, __ATOMIC_RELAXED), next;
        T f;
        do {
            std::memcpy(&f, &old, sizeof f);
            f += v;
            std::memcpy(&next, &f, sizeof f);
        } while (!__atomic_compare_exchange_n(q, &old, next, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
        std::memcpy(&f, &old, sizeof f);
        return f;
    } else {
        return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    }
}
template <class T> inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicCAS(T* p, T cmp, T v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
template <class T> inline T atomicMax(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
    return old;
}
template <class T> inline T atomicMin(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {}
    return old;
}

// ---------------------------------------------------------------------------------------------
// fp16: __half is GCC's IEEE _Float16 (g++ 12+ on x86), so every conversion rounds to nearest even.
// Older compilers (Colab's g++ 11) lack _Float16: there __half is 16 bits with the same rounding,
// done in software. GEMMLAB_SOFT_HALF forces that path (the tests use it).
// ---------------------------------------------------------------------------------------------
#if defined(__FLT16_MAX__) && !defined(GEMMLAB_SOFT_HALF)
typedef _Float16 __half;
#else
namespace emu {
inline unsigned short float_to_half_bits(float f) {  // round to nearest, ties to even
    unsigned x;
    std::memcpy(&x, &f, 4);
    const unsigned sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    const int exp = (x >> 23) & 0xff, e = exp - 127 + 15;
    if (exp == 0xff) return (unsigned short)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
    if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);  // too large: infinity
    if (e <= 0) {                                              // a subnormal half, or zero
        if (e < -10) return (unsigned short)sign;
        const unsigned full = mant | 0x800000u, shift = (unsigned)(14 - e);
        unsigned m = full >> shift;
        const unsigned rest = full & ((1u << shift) - 1), half_way = 1u << (shift - 1);
        if (rest > half_way || (rest == half_way && (m & 1u))) ++m;
        return (unsigned short)(sign | m);
    }
    unsigned h = sign | ((unsigned)e << 10) | (mant >> 13);
    const unsigned rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry rounds up into the exponent
    return (unsigned short)h;
}
inline float half_bits_to_float(unsigned short h) {
    const unsigned sign = (unsigned)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {  // zero or subnormal: mant x 2^-24
        const float f = std::ldexp((float)mant, -24);
        return sign ? -f : f;
    }
    const unsigned x = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
}  // namespace emu
struct __half {
    unsigned short bits;
    __half() = default;
    template <class T, class = typename std::enable_if<std::is_arithmetic<T>::value>::type>
    __half(T v) : bits(emu::float_to_half_bits((float)v)) {}
    operator float() const { return emu::half_bits_to_float(bits); }
    __half operator-() const { __half r; r.bits = (unsigned short)(bits ^ 0x8000u); return r; }
};
#endif
typedef __half half;
struct __align__(4) __half2 {
    __half x, y;
};
typedef __half2 half2;

inline __half __float2half(float f) { return (__half)f; }
inline __half __float2half_rn(float f) { return (__half)f; }
inline __half __double2half(double d) { return (__half)d; }
inline __half __int2half_rn(int i) { return (__half)i; }
inline float __half2float(__half h) { return (float)h; }
inline float __low2float(__half2 h) { return (float)h.x; }
inline float __high2float(__half2 h) { return (float)h.y; }
inline __half2 __floats2half2_rn(float a, float b) { return {(__half)a, (__half)b}; }
inline __half2 __float2half2_rn(float a) { return {(__half)a, (__half)a}; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline __half2 __half2half2(__half a) { return {a, a}; }
inline float2 __half22float2(__half2 h) { return {(float)h.x, (float)h.y}; }
inline __half2 __float22half2_rn(float2 f) { return {(__half)f.x, (__half)f.y}; }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half2 __lows2half2(__half2 a, __half2 b) { return {a.x, b.x}; }
inline __half2 __highs2half2(__half2 a, __half2 b) { return {a.y, b.y}; }
inline unsigned short __half_as_ushort(__half h) { unsigned short u; std::memcpy(&u, &h, 2); return u; }
inline __half __ushort_as_half(unsigned short u) { __half h; std::memcpy(&h, &u, 2); return h; }
// Arithmetic in float then one rounding: float holds >= 2*11+2 bits, so the result is the
// correctly rounded half result (no double-rounding error) for +, -, *.
inline __half __hadd(__half a, __half b) { return (__half)((float)a + (float)b); }
inline __half __hsub(__half a, __half b) { return (__half)((float)a - (float)b); }
inline __half __hmul(__half a, __half b) { return (__half)((float)a * (float)b); }
inline __half __hfma(__half a, __half b, __half c) { return (__half)std::fma((double)a, (double)b, (double)c); }
inline __half __hneg(__half a) { return -a; }
inline __half2 __hadd2(__half2 a, __half2 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
inline __half2 __hsub2(__half2 a, __half2 b) { return {__hsub(a.x, b.x), __hsub(a.y, b.y)}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }

// ---------------------------------------------------------------------------------------------
// Runtime state shared with runtime.cpp
// ---------------------------------------------------------------------------------------------
namespace emu {
namespace detail {

enum FiberState : int { RUNNABLE, AT_BARRIER, AT_WARP, EXITED, AT_SPIN };

struct Warp;
struct Fiber {
    void* sp;          // saved stack pointer while switched out
    int state;         // FiberState
    int line;          // source line of the barrier / collective it waits at
    unsigned lane;
    unsigned tid;      // linear thread index in the block
    int bar_id;        // the barrier it waits at (0: __syncthreads, 1..15: bar.sync id)
    uint3 thread_idx;
    Warp* warp;
    const void* in;    // this lane's operand of the pending warp collective
    void* out;         // where the collective's result for this lane goes
    unsigned cta;      // its block's rank in the cluster (0 outside clusters): which shared memory it sees
};

struct Warp {
    Fiber* lanes[32];
    unsigned nlanes;         // 32, or fewer in the last warp of a block such as 48 threads
    unsigned live_mask;      // lanes that have not exited
    unsigned arrived_mask;   // lanes waiting at the current collective
    unsigned wait_mask;      // lanes the current collective waits for (its mask argument)
    void (*complete)(Warp&); // computes the current collective for all arrived lanes
    const void* fn;
    int line;
};

extern __thread Fiber* current;
extern __thread char* dynamic_smem_base;

void syncthreads(int line);
void bar_sync(int id, int count, int line);          // named barrier: `count` threads arrive at `id`
void warp_wait(Fiber* f);                          // switch away until the collective completes
void warp_finish(Warp& w);                         // run w.complete, wake the lanes waiting on w
[[noreturn]] void warp_mismatch(Warp& w, int line);
void cp_async_push(void* dst, const void* src, int src_bytes);
void cp_async_commit_group();
void cp_async_wait(int pending_groups);
void spin_wait(int line);                          // switch away; resumed after the other fibers ran
void* array_argument(int index);                   // where kernel argument `index` (an array) lives
[[noreturn]] void misuse(const char* what);        // a kernel used a twin in a way the emulator cannot model
extern __thread long long mbarrier_events;         // mbarrier changes on this OS thread: spinners' progress
// Clusters (__cluster_dims__): one OS thread runs every block of a cluster, their threads all fibers of it.
void cluster_sync(int line);                       // barrier.cluster: every thread of every block of the cluster
unsigned cluster_size();                           // blocks per cluster (1 outside clusters)
char* cluster_smem(unsigned cta, const char* what);  // dynamic shared memory of the block of that rank

// Analysis mode (gemmlab/runtime/emulator/analysis.cpp, linked only into analysis builds, see gemmlab/runtime/cpu.py
// analyze()): the runtime calls these hooks at the points where a warp's lanes are in step.
// `analysis` stays null in a normal build, so each hook costs one test of a pointer.
struct AnalysisArray { const char* start; size_t nbytes; int arg; };
struct AnalysisHooks {
    long long (*max_blocks)(long long nblocks);              // how many blocks to run
    void (*launch)(const AnalysisArray* arrays, int n);      // the mapped array arguments
    void (*worker_begin)(int nthreads, const char* smem, size_t smem_bytes);
    void (*block_begin)();
    void (*barrier)();                 // every thread of the block is at a __syncthreads()
    void (*warp_sync)(Warp& w);        // the collective of w is about to complete
    void (*block_end)();
    void (*worker_end)();
    void (*finish)();                  // after the grid: write the counts
    void (*cp_async)(const void* pc, const void* smem_dst, const void* gmem_src, int src_bytes);
    void (*ldmatrix)(const void* pc, const void* row, int matrices);
};
extern AnalysisHooks* analysis;
extern __thread int in_collective;     // a warp collective's compute: its memory reads are not the kernel's
void note_ldmatrix(const void* row, int matrices);   // records this lane's ldmatrix row (analysis mode)

template <class In, class Out, class Fn>
void complete_collective(Warp& w) {
    In ins[32] = {};
    Out outs[32] = {};
    for (unsigned l = 0; l < w.nlanes; ++l)
        if (w.arrived_mask >> l & 1u) ins[l] = *static_cast<const In*>(w.lanes[l]->in);
    (*static_cast<const Fn*>(w.fn))(static_cast<const In*>(ins), static_cast<Out*>(outs));
    for (unsigned l = 0; l < w.nlanes; ++l)
        if (w.arrived_mask >> l & 1u) *static_cast<Out*>(w.lanes[l]->out) = outs[l];
}

}  // namespace detail

inline unsigned lane_id() { return detail::current->lane; }
inline void* dynamic_smem() { return detail::dynamic_smem_base; }

// Every lane of the calling warp in `mask` deposits `in`; once every such lane that has not
// exited arrived, fn(ins, outs) (arrays indexed by lane, 32 long; zero for absent lanes) runs
// once, in the last lane to arrive, and each lane gets outs[lane]. fn must not capture per-lane
// values. All lanes of a warp must call the same collective with the same mask.
template <class In, class Out, class Fn>
Out warp_collective_masked(unsigned mask, const In& in, Fn fn, int line) {
    using namespace detail;
    Fiber* f = current;
    Warp& w = *f->warp;
    Out out{};
    f->in = &in;
    f->out = &out;
    f->line = line;
    void (*complete)(Warp&) = &complete_collective<In, Out, Fn>;
    // A collective of other lanes (a disjoint mask) is pending: wait until it completes.
    while (w.arrived_mask && !(w.wait_mask >> f->lane & 1u)) warp_wait(f);
    if (w.arrived_mask == 0) {
        w.complete = complete;
        w.fn = &fn;
        w.line = line;
        w.wait_mask = mask | 1u << f->lane;
    } else if (w.complete != complete) {
        warp_mismatch(w, line);
    }
    w.arrived_mask |= 1u << f->lane;
    if ((w.arrived_mask & w.live_mask) == (w.wait_mask & w.live_mask))
        warp_finish(w);
    else
        warp_wait(f);
    return out;
}

template <class In, class Out, class Fn>
Out warp_collective(const In& in, Fn fn, int line = __builtin_LINE()) {
    return warp_collective_masked<In, Out>(0xffffffffu, in, fn, line);
}

}  // namespace emu

inline void __syncthreads(int line = __builtin_LINE()) { emu::detail::syncthreads(line); }

// ---------------------------------------------------------------------------------------------
// Warp intrinsics, all built on warp_collective: each waits for the live lanes in its mask.
// ---------------------------------------------------------------------------------------------
namespace emu {
namespace detail {
template <class T> struct ShflIn { T v; int src; int present; };
struct PredIn { int pred; int present; };
struct Nothing { int present; };
template <class T> inline T shfl_with(unsigned mask, const T& v, int src, int line) {
    // src < 0 or an absent source lane: the lane keeps its own value.
    ShflIn<T> in{v, src, 1};
    return warp_collective_masked<ShflIn<T>, T>(mask, in, [](const ShflIn<T>* ins, T* outs) {
        for (int l = 0; l < 32; ++l) {
            int s = ins[l].src;
            outs[l] = (s >= 0 && s < 32 && ins[s].present) ? ins[s].v : ins[l].v;
        }
    }, line);
}
}  // namespace detail
}  // namespace emu

inline void __syncwarp(unsigned mask = 0xffffffffu, int line = __builtin_LINE()) {
    emu::detail::Nothing in{1};
    emu::warp_collective_masked<emu::detail::Nothing, int>(mask, in, [](const emu::detail::Nothing*, int*) {}, line);
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32, int line = __builtin_LINE()) {
    int lane = (int)emu::lane_id();
    return emu::detail::shfl_with(mask, v, (lane & ~(width - 1)) + (src & (width - 1)), line);
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32, int line = __builtin_LINE()) {
    int lane = (int)emu::lane_id();
    int src = lane ^ m;
    return emu::detail::shfl_with(mask, v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : -1, line);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32, int line = __builtin_LINE()) {
    int lane = (int)emu::lane_id();
    return emu::detail::shfl_with(mask, v, (lane & (width - 1)) + (int)d < width ? lane + (int)d : -1, line);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32, int line = __builtin_LINE()) {
    int lane = (int)emu::lane_id();
    return emu::detail::shfl_with(mask, v, (lane & (width - 1)) >= (int)d ? lane - (int)d : -1, line);
}
inline unsigned __ballot_sync(unsigned mask, int pred, int line = __builtin_LINE()) {
    emu::detail::PredIn in{pred != 0, 1};
    return mask & emu::warp_collective_masked<emu::detail::PredIn, unsigned>(mask, in, [](const emu::detail::PredIn* ins, unsigned* outs) {
        unsigned b = 0;
        for (int l = 0; l < 32; ++l) b |= (unsigned)ins[l].pred << l;
        for (int l = 0; l < 32; ++l) outs[l] = b;
    }, line);
}
inline unsigned __activemask() { return emu::detail::current->warp->live_mask; }
inline int __any_sync(unsigned mask, int pred, int line = __builtin_LINE()) {
    return (__ballot_sync(mask, pred, line) & mask) != 0;
}
inline int __all_sync(unsigned mask, int pred, int line = __builtin_LINE()) {
    emu::detail::PredIn in{pred != 0, 1};
    unsigned present = emu::warp_collective_masked<emu::detail::PredIn, unsigned>(mask, in, [](const emu::detail::PredIn* ins, unsigned* outs) {
        unsigned p = 0, t = 0;
        for (int l = 0; l < 32; ++l) { p |= (unsigned)ins[l].present << l; t |= (unsigned)ins[l].pred << l; }
        for (int l = 0; l < 32; ++l) outs[l] = p & ~t;   // present lanes whose predicate is false
    }, line);
    return (present & mask) == 0;
}

// ---------------------------------------------------------------------------------------------
// Emulated twins of the inline-PTX wrappers in kernels/common.cuh (PTX ISA fragment layouts:
// groupID g = lane >> 2, threadID_in_group t = lane % 4; the lower 16 bits of a register hold
// the element with the smaller column / k index).
// ---------------------------------------------------------------------------------------------
namespace emu {
namespace detail {
inline float h2f(unsigned bits16) { unsigned short u = (unsigned short)bits16; __half h; std::memcpy(&h, &u, 2); return (float)h; }
inline unsigned f2h(float f) { __half h = (__half)f; unsigned short u; std::memcpy(&u, &h, 2); return u; }
inline unsigned pack(unsigned lo16, unsigned hi16) { return (lo16 & 0xffffu) | (hi16 << 16); }

template <int NUM, bool TRANS> struct Ldmatrix {
    struct Out { unsigned r[NUM]; };
    static Out run(const void* row) {
        if (analysis && lane_id() < 8 * NUM) note_ldmatrix(row, NUM);
        return warp_collective<const void*, Out>(row, [](const void* const* rows, Out* outs) {
            // Lanes 8j..8j+7 give the row addresses of matrix j (8 rows of 8 b16 elements).
            for (int j = 0; j < NUM; ++j)
                for (int l = 0; l < 32; ++l) {
                    int r = l / 4, c = 2 * (l % 4);
                    unsigned short e0, e1;
                    if (!TRANS) {
                        const unsigned short* p = static_cast<const unsigned short*>(rows[8 * j + r]);
                        e0 = p[c];
                        e1 = p[c + 1];
                    } else {  // element (r, c) of the transposed matrix is (c, r) of the stored one
                        e0 = static_cast<const unsigned short*>(rows[8 * j + c])[r];
                        e1 = static_cast<const unsigned short*>(rows[8 * j + c + 1])[r];
                    }
                    outs[l].r[j] = pack(e0, e1);
                }
        });
    }
};

// D (16 x 8) = A (16 x K) * B (K x 8) + C, fp32 accumulation; fp16 inputs multiply exactly in fp32.
template <int K> struct MmaOperands { unsigned a[K / 4]; unsigned b[K / 8]; float c[4]; };
struct Mma4 { float d[4]; };
// The 16 x 8 accumulator tile of every m16n8 shape: c0:(g, 2t) c1:(g, 2t+1) c2:(g+8, 2t) c3:(g+8, 2t+1).
inline void scatter_c(float (&C)[16][8], int lane, const float (&c)[4]) {
    int g = lane >> 2, t = lane & 3;
    C[g][2 * t] = c[0];
    C[g][2 * t + 1] = c[1];
    C[g + 8][2 * t] = c[2];
    C[g + 8][2 * t + 1] = c[3];
}
inline Mma4 gather_d(const float (&C)[16][8], int lane) {
    int g = lane >> 2, t = lane & 3;
    return Mma4{{C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1]}};
}
template <int K> inline Mma4 mma_f32acc(const MmaOperands<K>& in) {
    return warp_collective<MmaOperands<K>, Mma4>(in, [](const MmaOperands<K>* ins, Mma4* outs) {
        float A[16][K], B[K][8], C[16][8];
        for (int l = 0; l < 32; ++l) {
            int g = l >> 2, t = l & 3;
            const MmaOperands<K>& o = ins[l];
            for (int i = 0; i < K / 4; ++i) {  // a0:(g, 2t) a1:(g+8, 2t) a2:(g, 2t+8) a3:(g+8, 2t+8)
                int row = g + 8 * (i & 1), col = 2 * t + 8 * (i >> 1);
                A[row][col] = h2f(o.a[i]);
                A[row][col + 1] = h2f(o.a[i] >> 16);
            }
            for (int i = 0; i < K / 8; ++i) {  // b0:(k 2t, col g) b1:(k 2t+8, col g)
                B[2 * t + 8 * i][g] = h2f(o.b[i]);
                B[2 * t + 8 * i + 1][g] = h2f(o.b[i] >> 16);
            }
            scatter_c(C, l, o.c);
        }
        for (int m = 0; m < 16; ++m)
            for (int n = 0; n < 8; ++n) {
                float acc = C[m][n];
                for (int k = 0; k < K; ++k) acc += A[m][k] * B[k][n];
                C[m][n] = acc;
            }
        for (int l = 0; l < 32; ++l) outs[l] = gather_d(C, l);
    });
}
template <int K> inline void mma_f16acc(unsigned (&d)[2], const unsigned* a, const unsigned* b, const unsigned (&c)[2]) {
    MmaOperands<K> in;
    for (int i = 0; i < K / 4; ++i) in.a[i] = a[i];
    for (int i = 0; i < K / 8; ++i) in.b[i] = b[i];
    in.c[0] = h2f(c[0]);        // c0 = half2 (row g, cols 2t, 2t+1), c1 = same cols of row g+8
    in.c[1] = h2f(c[0] >> 16);
    in.c[2] = h2f(c[1]);
    in.c[3] = h2f(c[1] >> 16);
    Mma4 r = mma_f32acc<K>(in);
    d[0] = pack(f2h(r.d[0]), f2h(r.d[1]));
    d[1] = pack(f2h(r.d[2]), f2h(r.d[3]));
}
template <int K> inline void mma_f32(float (&d)[4], const unsigned* a, const unsigned* b, const float (&c)[4]) {
    MmaOperands<K> in;
    for (int i = 0; i < K / 4; ++i) in.a[i] = a[i];
    for (int i = 0; i < K / 8; ++i) in.b[i] = b[i];
    for (int i = 0; i < 4; ++i) in.c[i] = c[i];
    Mma4 r = mma_f32acc<K>(in);
    for (int i = 0; i < 4; ++i) d[i] = r.d[i];
}
// D (16 x 8) = A (16 x 8) * B (8 x 8) + C with TF32 inputs: the tensor core reads the top 19
// bits of each register (the low 13 are dropped); a product of two TF32 values is exact in fp32.
// The sum is modelled as exact (double) and rounded once toward zero, as the tensor cores truncate
// where an FADD rounds to nearest: an accumulator fed mma after mma drifts toward zero here as on
// the GPU (not bit for bit: the hardware's alignment of the addends is not documented).
struct MmaTf32Operands { unsigned a[4]; unsigned b[2]; float c[4]; };
inline float tf32_bits(unsigned u) {
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return __uint_as_float(0x7fffffffu);  // NaN stays NaN
    return __uint_as_float(u & 0xffffe000u);
}
// C (16 x N) += A (16 x 8) * B (8 x N), each sum exact (double) and rounded once toward zero: the TF32
// tensor cores' addition, shared by mma.sync's twin (N = 8) and wgmma's (one warp's 16 rows).
template <int N> inline void tf32_sum_rows(float (&C)[16][N], const float (&A)[16][8], const float (&B)[8][N]) {
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < N; ++n) {
            double acc = C[m][n];
            for (int k = 0; k < 8; ++k) acc += (double)A[m][k] * B[k][n];
            float f = (float)acc;  // to nearest; step back toward zero if that rounded up in magnitude
            if (std::isfinite(f) && std::fabs((double)f) > std::fabs(acc)) f = std::nextafter(f, 0.0f);
            C[m][n] = f;
        }
}
inline Mma4 mma_tf32(const MmaTf32Operands& in) {
    return warp_collective<MmaTf32Operands, Mma4>(in, [](const MmaTf32Operands* ins, Mma4* outs) {
        float A[16][8], B[8][8], C[16][8];
        for (int l = 0; l < 32; ++l) {
            int g = l >> 2, t = l & 3;
            const MmaTf32Operands& o = ins[l];
            for (int i = 0; i < 4; ++i) A[g + 8 * (i & 1)][t + 4 * (i >> 1)] = tf32_bits(o.a[i]);
            for (int i = 0; i < 2; ++i) B[t + 4 * i][g] = tf32_bits(o.b[i]);
            scatter_c(C, l, o.c);
        }
        tf32_sum_rows<8>(C, A, B);
        for (int l = 0; l < 32; ++l) outs[l] = gather_d(C, l);
    });
}
}  // namespace detail

namespace detail {
template <bool Trans, class... R>  // one ldmatrix of sizeof...(R) matrices into this lane's registers r...
inline void ldmatrix_into(const void* p, R&... r) {
    auto o = Ldmatrix<sizeof...(R), Trans>::run(p);
    unsigned* out[] = {&r...};
    for (size_t i = 0; i < sizeof...(R); ++i) *out[i] = o.r[i];
}
}  // namespace detail
inline void ldmatrix_x1(unsigned& r0, const void* p) { detail::ldmatrix_into<false>(p, r0); }
inline void ldmatrix_x2(unsigned& r0, unsigned& r1, const void* p) { detail::ldmatrix_into<false>(p, r0, r1); }
inline void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    detail::ldmatrix_into<false>(p, r0, r1, r2, r3);
}
inline void ldmatrix_x1_trans(unsigned& r0, const void* p) { detail::ldmatrix_into<true>(p, r0); }
inline void ldmatrix_x2_trans(unsigned& r0, unsigned& r1, const void* p) { detail::ldmatrix_into<true>(p, r0, r1); }
inline void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    detail::ldmatrix_into<true>(p, r0, r1, r2, r3);
}
inline void mma_m16n8k8_f32(float (&d)[4], const unsigned (&a)[2], const unsigned (&b)[1], const float (&c)[4]) {
    detail::mma_f32<8>(d, a, b, c);
}
inline void mma_m16n8k16_f32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
    detail::mma_f32<16>(d, a, b, c);
}
inline void mma_m16n8k8_f16(unsigned (&d)[2], const unsigned (&a)[2], const unsigned (&b)[1], const unsigned (&c)[2]) {
    detail::mma_f16acc<8>(d, a, b, c);
}
inline void mma_m16n8k16_f16(unsigned (&d)[2], const unsigned (&a)[4], const unsigned (&b)[2], const unsigned (&c)[2]) {
    detail::mma_f16acc<16>(d, a, b, c);
}
inline void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
    detail::MmaTf32Operands in;
    for (int i = 0; i < 4; ++i) in.a[i] = a[i];
    for (int i = 0; i < 2; ++i) in.b[i] = b[i];
    for (int i = 0; i < 4; ++i) in.c[i] = c[i];
    detail::Mma4 r = detail::mma_tf32(in);
    for (int i = 0; i < 4; ++i) d[i] = r.d[i];
}
// cp.async: queued per thread, performed by the wait that completes its group, so a kernel that
// reads before waiting sees stale shared memory (as it may on the GPU).
inline void cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) { detail::cp_async_push(smem_dst, gmem_src, src_bytes); }
inline void cp_async_commit() { detail::cp_async_commit_group(); }
template <int N> inline void cp_async_wait_group() { detail::cp_async_wait(N); }
inline void cp_async_wait_all() { detail::cp_async_commit_group(); detail::cp_async_wait(0); }
inline void bar_sync(int id, int count, int line = __builtin_LINE()) { detail::bar_sync(id, count, line); }
// Scoped atomics (grid_barrier): blocks run on OS threads, so these are C++ atomics with the same
// ordering; a spinning reader busy-waits on its OS thread while the other blocks run on theirs.
inline unsigned atom_add_release_gpu(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELEASE); }
inline unsigned ld_acquire_gpu(const unsigned* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline unsigned ld_relaxed_gpu(const unsigned* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void atom_add_relaxed_gpu(unsigned* p, unsigned v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline void fence_acq_rel_gpu() { __atomic_thread_fence(__ATOMIC_ACQ_REL); }
// Between two polls of counters that another block sets (common.cuh's wait_counters): this block's other
// fibers run first (they may have to release one); each poll counts as progress for the deadlock check,
// which sees one block only (a counter never set ends in the launch's timeout instead).
inline void poll_pause(int line) {
    ++detail::mbarrier_events;
    detail::spin_wait(line);
}

// ---------------------------------------------------------------------------------------------
// Hopper twins (common.cuh's sm_90a section). An mbarrier is 8 bytes of shared memory holding
// {count, pending arrivals, phase bit, pending bytes}; a waiter whose phase has not completed
// spins: it switches away and re-checks after every other thread ran (the runtime reports a
// deadlock when only spinners are left and none of their barriers changed). TMA copies at once
// (there is no background engine) and then counts its bytes; wgmma computes at once, each thread
// its own accumulators, reading A and B through the descriptors exactly as the GPU would.
// ---------------------------------------------------------------------------------------------
namespace detail {
struct Mbarrier { unsigned count : 15, pending : 15, phase : 1; int bytes; };
static_assert(sizeof(Mbarrier) == 8, "an mbarrier is 64 bits");
inline Mbarrier& mbar(unsigned long long* p) { return *reinterpret_cast<Mbarrier*>(p); }
inline void mbarrier_settle(Mbarrier& b) {  // a phase completes when no arrival and no byte is pending
    ++mbarrier_events;
    if (b.pending == 0 && b.bytes == 0) {
        b.phase ^= 1u;
        b.pending = b.count;
    }
}
// Address bits 4-6 XOR bits 7-9: the 128-byte swizzle of TMA and wgmma, on the shared-window offset.
inline unsigned char* swizzle128(unsigned char* base, size_t offset) {
    return base + (offset ^ ((offset >> 7) & 7u) << 4);
}
// gemmlab/runtime/tma.py's emulator encoding of a tensor map: 'GEMMLAB' magic, the kernel argument that
// holds the tensor, element size, columns and rows, row stride (bytes), box columns and rows, swizzle (bytes).
enum TmaField { TMA_MAGIC, TMA_ARG, TMA_ELEM, TMA_COLS, TMA_ROWS, TMA_STRIDE, TMA_BOX_COLS, TMA_BOX_ROWS, TMA_SWIZZLE };
constexpr unsigned long long kTmaMagic = 0x414d54424c4d4547ull;  // "GEMLBTMA"
}  // namespace detail

inline unsigned smem_u32(const void* p) {  // the offset in the block's dynamic shared memory
    return (unsigned)(static_cast<const char*>(p) - detail::dynamic_smem_base);
}
inline void mbarrier_init(unsigned long long* bar, int count) {
    detail::Mbarrier& b = detail::mbar(bar);
    b.count = b.pending = (unsigned)count;
    b.phase = 0;
    b.bytes = 0;
}
inline void fence_barrier_init() {}
inline void mbarrier_arrive(unsigned long long* bar) {
    detail::Mbarrier& b = detail::mbar(bar);
    b.pending -= 1;
    detail::mbarrier_settle(b);
}
inline void mbarrier_arrive_if(unsigned long long* bar, bool pred) {
    if (pred) mbarrier_arrive(bar);
}
inline void mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
    detail::Mbarrier& b = detail::mbar(bar);
    b.bytes += (int)bytes;
    b.pending -= 1;
    detail::mbarrier_settle(b);
}
inline void mbarrier_wait(unsigned long long* bar, unsigned parity, int line = __builtin_LINE()) {
    while (detail::mbar(bar).phase == (parity & 1u)) detail::spin_wait(line);
}
inline void tma_map_acquire(const void*) {}  // the kernel's `const TmaMap*` converts
namespace detail {
// The box at (col, row) of `map`'s tensor into the shared memory at `smem` (a block's dynamic shared
// memory), at offset `at`; its bytes counted on the mbarrier at offset `bar_at` of the same memory.
inline void tma_box(char* smem, size_t at, const void* map, int col, int row, size_t bar_at) {
    const unsigned long long* f = static_cast<const unsigned long long*>(map);
    if (f[TMA_MAGIC] != kTmaMagic) {
        misuse("tma_load_2d got a tensor map not made for the emulator (make it with gemmlab.tma.tensor_map)");
    }
    const unsigned char* src = static_cast<const unsigned char*>(array_argument((int)f[TMA_ARG]));
    const size_t elem = f[TMA_ELEM], row_bytes = f[TMA_BOX_COLS] * elem;
    unsigned char* base = reinterpret_cast<unsigned char*>(smem);
    for (size_t r = 0; r < f[TMA_BOX_ROWS]; ++r)
        for (size_t c = 0; c < f[TMA_BOX_COLS]; ++c) {
            const long long gr = row + (long long)r, gc = col + (long long)c;
            const bool inside = gr >= 0 && gc >= 0 && gr < (long long)f[TMA_ROWS] && gc < (long long)f[TMA_COLS];
            const size_t offset = at + r * row_bytes + c * elem;
            unsigned char* out = f[TMA_SWIZZLE] == 128 ? swizzle128(base, offset) : base + offset;
            if (inside) std::memcpy(out, src + gr * f[TMA_STRIDE] + gc * elem, elem);
            else std::memset(out, 0, elem);
        }
    Mbarrier& b = mbar(reinterpret_cast<unsigned long long*>(smem + bar_at));
    b.bytes -= (int)(row_bytes * f[TMA_BOX_ROWS]);
    mbarrier_settle(b);
}
}  // namespace detail
inline void tma_load_2d(void* dst, const void* map, int col, int row, unsigned long long* bar) {
    detail::tma_box(detail::dynamic_smem_base, smem_u32(dst), map, col, row, smem_u32(bar));
}
inline void wgmma_fence() {}
namespace detail {
// A wgmma descriptor's field at `shift` (start address, leading or stride byte offset), in bytes.
inline size_t desc_field(unsigned long long desc, int shift) { return (size_t)((desc >> shift) & 0x3fff) << 4; }
inline void wgmma_record(unsigned long long a, unsigned long long b, int n);  // below, beside the TMA stores
}
template <int R> inline void wgmma_fence_operands(float (&)[R]) {}
template <int R> inline void wgmma_fence_operands(unsigned (&)[R]) {}
template <int R> inline void setmaxnreg_dec() {}
template <int R> inline void setmaxnreg_inc() {}
inline unsigned long long wgmma_desc_sw128(const void* p, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((smem_u32(p) & 0x3ffff) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
           (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}
// D (64 x N) += A (64 x 16, K-major) * B (16 x N, N-major), 128-byte swizzled, for this thread's
// accumulators (the layout in common.cuh); threadIdx.x % 128 is its place in the warpgroup.
// Products of fp16 values are exact in fp32; they are added in k order.
template <int N> inline void wgmma_m64k16_f32(float (&d)[N / 2], unsigned long long a, unsigned long long b) {
    using detail::swizzle128;
    unsigned char* base = reinterpret_cast<unsigned char*>(detail::dynamic_smem_base);
    using detail::desc_field;
    if ((a >> 62) != 1 || (b >> 62) != 1) {
        detail::misuse("the emulator's wgmma models 128-byte-swizzled descriptors (layout type 1) only");
    }
    if (threadIdx.x % 128 == 0) detail::wgmma_record(a, b, N);  // what its group reads, checked at the wait
    const size_t a_start = desc_field(a, 0), a_sbo = desc_field(a, 32);
    const size_t b_start = desc_field(b, 0), b_lbo = desc_field(b, 16), b_sbo = desc_field(b, 32);
    auto A = [&](int m, int k) {  // K-major: 8-row atoms sbo apart, 128-byte rows
        return (float)*reinterpret_cast<const __half*>(swizzle128(base, a_start + m / 8 * a_sbo + m % 8 * 128 + k * 2));
    };
    auto B = [&](int k, int n) {  // N-major: 64-column blocks lbo apart, 8-k atoms sbo apart
        return (float)*reinterpret_cast<const __half*>(
            swizzle128(base, b_start + n / 64 * b_lbo + n % 64 * 2 + k / 8 * b_sbo + k % 8 * 128));
    };
    const int t = (int)(threadIdx.x % 128), lane = t % 32;
    const int r = t / 32 * 16 + lane / 4;
    for (int j = 0; j < N / 8; ++j)
        for (int v = 0; v < 4; ++v) {
            const int m = r + 8 * (v / 2), n = 8 * j + 2 * (lane % 4) + v % 2;
            float acc = d[4 * j + v];
            for (int k = 0; k < 16; ++k) acc += A(m, k) * B(k, n);
            d[4 * j + v] = acc;
        }
}

// D (64 x N) = A (64 x 8, TF32, registers) * B (8 x N, TF32, K-major, 128-byte swizzled) + (scale_d ?
// D : 0). Warp w's rows of D need only warp w's rows of A, so it is a warp collective: each warp
// gathers its 16 x 8 slice of A from its lanes (mma.m16n8k8's layout) and reads B through the
// descriptor. Summed and rounded toward zero once per call (tf32_sum_rows), as the TF32 mma.sync twin does.
// TMA stores (common.cuh's tma_store_2d, bulk_commit_group, bulk_wait_group(_read)): each thread keeps
// its stores in bulk groups, as the GPU does. A store is performed at the wait that retires its group
// (the latest moment the GPU may read its shared memory), clipped to the tensor. What the GPU leaves
// undefined is an error here: shared memory that changes between the store's issue and that wait (the
// buffer reused without bulk_wait_group_read), a store whose issuing thread has not run
// fence_proxy_async() since its previous store (its writes to the buffer may not be seen by the TMA
// unit; only the issuing thread's fence is checked), and a thread that exits with stores not waited for.
namespace detail {
struct BulkStore {
    const char* smem; size_t at; const void* map; int col, row, group, line;
    std::vector<unsigned char> issued;  // the box's shared-memory bytes when the store was issued
};
// wgmma (fp16, descriptors for A and B) computes at once, but on the GPU the tensor cores may read its
// shared-memory operands until wgmma_wait retires its group. Thread 0 of each warpgroup records a hash of
// the bytes each of its wgmmas read; the wait that retires the group hashes them again, and a difference
// is an error: the stage was refilled (its `empty` arrival came before the wait) while it could still be read.
struct WgmmaRead { size_t a_start, a_sbo, b_start, b_lbo, b_sbo; int n, group; unsigned long long hash; };
// One thread's work on the async proxy: its TMA stores in bulk groups, and (thread 0 of a warpgroup) what its
// pending wgmma groups read.
struct AsyncState {
    std::vector<BulkStore> stores; int open_group = 0; bool fenced = false;
    std::vector<WgmmaRead> wgmma_reads; int wgmma_open = 0;  // wgmma groups, as the TMA stores' bulk groups
};
// A __thread pointer (no TLS guard, one %fs load) to a heap map: the analysis excludes the pointer from
// shared memory (analysis.cpp), and a thread_local map's guard and wrapper would count as shared accesses.
inline __thread std::unordered_map<const Fiber*, AsyncState>* async_states = nullptr;
inline AsyncState& async_state() {
    if (!async_states) async_states = new std::unordered_map<const Fiber*, AsyncState>();
    return (*async_states)[current];
}
// FNV-1a over the 16-byte chunks a wgmma m64nNk16 reads: A's 64 rows x 16 k (32 bytes of each 128-byte
// row), B's 16 k rows x N columns (N / 64 boxes of 128 bytes), both through the 128-byte swizzle.
inline unsigned long long wgmma_operand_hash(const WgmmaRead& w) {
    const unsigned char* base = reinterpret_cast<const unsigned char*>(dynamic_smem_base);
    unsigned long long h = 1469598103934665603ull;
    auto mix = [&](size_t offset) {
        unsigned long long v[2];
        std::memcpy(v, swizzle128(const_cast<unsigned char*>(base), offset), 16);
        h = ((h ^ v[0]) * 1099511628211ull ^ v[1]) * 1099511628211ull;
    };
    for (int m = 0; m < 64; ++m)
        for (int c = 0; c < 32; c += 16) mix(w.a_start + m / 8 * w.a_sbo + m % 8 * 128 + c);
    for (int k = 0; k < 16; ++k)
        for (int box = 0; box < (w.n + 63) / 64; ++box)
            for (int c = 0; c < 128; c += 16) mix(w.b_start + box * w.b_lbo + k / 8 * w.b_sbo + k % 8 * 128 + c);
    return h;
}
inline size_t tma_box_bytes(const unsigned long long* f) { return f[TMA_BOX_COLS] * f[TMA_ELEM] * f[TMA_BOX_ROWS]; }
inline void bulk_perform(const BulkStore& s) {
    const unsigned long long* f = static_cast<const unsigned long long*>(s.map);
    if (std::memcmp(s.smem + s.at, s.issued.data(), s.issued.size()) != 0) {
        misuse(("thread " + std::to_string(current->tid) + ": the shared memory that the TMA store of line " +
                std::to_string(s.line) + " reads was written again before the store's group was waited for "
                "(bulk_wait_group_read): the buffer was reused while the TMA unit could still be reading it").c_str());
    }
    unsigned char* dst = static_cast<unsigned char*>(array_argument((int)f[TMA_ARG]));
    const size_t elem = f[TMA_ELEM], row_bytes = f[TMA_BOX_COLS] * elem;
    unsigned char* base = reinterpret_cast<unsigned char*>(const_cast<char*>(s.smem));
    for (size_t r = 0; r < f[TMA_BOX_ROWS]; ++r)
        for (size_t c = 0; c < f[TMA_BOX_COLS]; ++c) {
            const long long gr = s.row + (long long)r, gc = s.col + (long long)c;
            if (gr < 0 || gc < 0 || gr >= (long long)f[TMA_ROWS] || gc >= (long long)f[TMA_COLS]) continue;  // clipped
            const size_t offset = s.at + r * row_bytes + c * elem;
            const unsigned char* in = f[TMA_SWIZZLE] == 128 ? swizzle128(base, offset) : base + offset;
            std::memcpy(dst + gr * f[TMA_STRIDE] + gc * elem, in, elem);
        }
}
inline void bulk_wait(int pending_groups) {
    AsyncState& st = async_state();
    const int done_below = st.open_group - pending_groups;  // committed groups older than this retire
    size_t n = 0;
    for (; n < st.stores.size() && st.stores[n].group < done_below; ++n) bulk_perform(st.stores[n]);
    st.stores.erase(st.stores.begin(), st.stores.begin() + n);
}
inline void wgmma_record(unsigned long long a, unsigned long long b, int n) {
    AsyncState& st = async_state();
    WgmmaRead w{desc_field(a, 0), desc_field(a, 32), desc_field(b, 0), desc_field(b, 16), desc_field(b, 32), n,
                st.wgmma_open, 0};
    w.hash = wgmma_operand_hash(w);
    st.wgmma_reads.push_back(w);
}
inline void wgmma_retire(int pending_groups) {
    AsyncState& st = async_state();
    const int done_below = st.wgmma_open - pending_groups;  // committed groups older than this are done
    size_t n = 0;
    for (; n < st.wgmma_reads.size() && st.wgmma_reads[n].group < done_below; ++n) {
        if (wgmma_operand_hash(st.wgmma_reads[n]) != st.wgmma_reads[n].hash) {
            misuse(("thread " + std::to_string(current->tid) + ": the shared memory that a wgmma of group " +
                    std::to_string(st.wgmma_reads[n].group) + " reads changed before wgmma_wait retired the group: "
                    "its stage was handed back (an `empty` arrival) and refilled while the tensor cores could still "
                    "be reading it; release a stage only after a wgmma_wait that leaves its group done").c_str());
        }
    }
    st.wgmma_reads.erase(st.wgmma_reads.begin(), st.wgmma_reads.begin() + n);
}
// runtime.cpp calls this when a thread's kernel function returns.
inline void async_thread_exit() {
    if (!async_states) return;  // no thread of this OS thread has stored anything
    auto it = async_states->find(current);
    if (it == async_states->end()) return;
    if (!it->second.wgmma_reads.empty()) {
        misuse(("thread " + std::to_string(current->tid) + " exited with wgmma groups not waited for: end the "
                "k loop with wgmma_wait<0>() before the accumulators are read").c_str());
    }
    if (!it->second.stores.empty()) {
        misuse(("thread " + std::to_string(current->tid) + " exited with " + std::to_string(it->second.stores.size()) +
                " TMA store(s) not waited for (the first on line " + std::to_string(it->second.stores[0].line) +
                "): end with bulk_wait_group<0>(), the block's shared memory goes away with its threads").c_str());
    }
    async_states->erase(it);
}
}  // namespace detail
inline void fence_proxy_async() {
    if (detail::current) detail::async_state().fenced = true;
}
inline void tma_store_2d(const void* map, const void* src, int col, int row, int line = __builtin_LINE()) {
    const unsigned long long* f = static_cast<const unsigned long long*>(map);
    if (f[detail::TMA_MAGIC] != detail::kTmaMagic)
        detail::misuse("tma_store_2d got a tensor map not made for the emulator (make it with gemmlab.tma.tensor_map)");
    const size_t at = smem_u32(src);
    if (at % 128) detail::misuse("tma_store_2d: the shared-memory box must start 128-byte aligned (1024 for a swizzled map)");
    if (f[detail::TMA_SWIZZLE] == 128 && at % 1024) detail::misuse("tma_store_2d: a 128-byte-swizzled box must start 1024-byte aligned");
    detail::AsyncState& st = detail::async_state();
    if (!st.fenced) {
        detail::misuse(("thread " + std::to_string(detail::current->tid) + ": TMA store on line " + std::to_string(line) +
                        " without fence_proxy_async() since this thread's previous store: the threads' writes to "
                        "the buffer are not ordered before the TMA unit's reads of it").c_str());
    }
    st.fenced = false;
    const char* smem = detail::dynamic_smem_base;
    detail::BulkStore s{smem, at, map, col, row, st.open_group, line, {}};
    s.issued.assign(smem + at, smem + at + detail::tma_box_bytes(f));
    st.stores.push_back(std::move(s));
}
inline void bulk_commit_group() { detail::async_state().open_group++; }
inline void wgmma_commit() {
    if (threadIdx.x % 128 == 0) detail::async_state().wgmma_open++;
}
template <int N> inline void wgmma_wait() {
    if (threadIdx.x % 128 == 0) detail::wgmma_retire(N);
}
template <int N> inline void bulk_wait_group_read() { detail::bulk_wait(N); }
template <int N> inline void bulk_wait_group() { detail::bulk_wait(N); }

// Clusters: the runtime runs all blocks of a cluster on one OS thread (their threads are fibers of
// one scheduler, so a wait on another block's progress is a spin like any other) and gives each its
// own dynamic shared memory; smem_u32() is an offset into it, which is what mapa keeps across blocks.
inline unsigned cluster_ctarank() { return detail::current->cta; }
inline void cluster_sync(int line = __builtin_LINE()) { detail::cluster_sync(line); }
inline void mbarrier_arrive_cluster(unsigned long long* bar, unsigned cta) {
    char* peer = detail::cluster_smem(cta, "mbarrier_arrive_cluster");
    mbarrier_arrive(reinterpret_cast<unsigned long long*>(peer + smem_u32(bar)));
}
inline void mbarrier_wait_cluster(unsigned long long* bar, unsigned parity, int line = __builtin_LINE()) {
    mbarrier_wait(bar, parity, line);
}
// Multicast: the box lands at dst's offset, its bytes on bar's offset, in every block of cta_mask.
inline void tma_load_2d_multicast(void* dst, const void* map, int col, int row, unsigned long long* bar,
                                  unsigned cta_mask) {
    if (cta_mask == 0 || cta_mask >> detail::cluster_size())
        detail::misuse("tma_load_2d_multicast: the CTA mask names no block, or a rank outside the cluster");
    for (unsigned r = 0; r < detail::cluster_size(); ++r)
        if (cta_mask >> r & 1u)
            detail::tma_box(detail::cluster_smem(r, "tma_load_2d_multicast"), smem_u32(dst), map, col, row, smem_u32(bar));
}
namespace detail {
template <int N> struct WgmmaTf32In { unsigned a[4]; float d[N / 2]; unsigned long long b; int scale_d; };
template <int N> struct WgmmaTf32Out { float d[N / 2]; };
}  // namespace detail
template <int N> inline void wgmma_m64k8_tf32(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long b, int scale_d) {
    using In = detail::WgmmaTf32In<N>;
    using Out = detail::WgmmaTf32Out<N>;
    if ((b >> 62) != 1) detail::misuse("the emulator's wgmma models 128-byte-swizzled descriptors (layout type 1) only");
    In in;
    for (int i = 0; i < 4; ++i) in.a[i] = a[i];
    for (int i = 0; i < N / 2; ++i) in.d[i] = d[i];
    in.b = b;
    in.scale_d = scale_d;
    Out r = warp_collective<In, Out>(in, [](const In* ins, Out* outs) {
        unsigned char* base = reinterpret_cast<unsigned char*>(detail::dynamic_smem_base);
        const unsigned long long desc = ins[0].b;
        const size_t start = (size_t)(desc & 0x3fff) << 4, sbo = (size_t)((desc >> 32) & 0x3fff) << 4;
        float A[16][8], B[8][N], C[16][N];
        for (int l = 0; l < 32; ++l) {
            const int g = l >> 2, t = l & 3;
            for (int i = 0; i < 4; ++i) A[g + 8 * (i & 1)][t + 4 * (i >> 1)] = detail::tf32_bits(ins[l].a[i]);
            for (int j = 0; j < N / 8; ++j)
                for (int v = 0; v < 4; ++v)
                    C[g + 8 * (v / 2)][8 * j + 2 * t + v % 2] = ins[0].scale_d ? ins[l].d[4 * j + v] : 0.0f;
        }
        for (int k = 0; k < 8; ++k)  // K-major: column n is a 128-byte row, 8-row atoms sbo apart
            for (int n = 0; n < N; ++n)
                B[k][n] = detail::tf32_bits(*reinterpret_cast<const unsigned*>(
                    detail::swizzle128(base, start + n / 8 * sbo + n % 8 * 128 + k * 4)));
        detail::tf32_sum_rows<N>(C, A, B);
        for (int l = 0; l < 32; ++l) {
            const int g = l >> 2, t = l & 3;
            for (int j = 0; j < N / 8; ++j)
                for (int v = 0; v < 4; ++v) outs[l].d[4 * j + v] = C[g + 8 * (v / 2)][8 * j + 2 * t + v % 2];
        }
    });
    for (int i = 0; i < N / 2; ++i) d[i] = r.d[i];
}

// ---------------------------------------------------------------------------------------------
// The generic main: gemmlab/runtime/cpu.py appends
//   int main(int argc, char** argv) { return emu::run_main(argc, argv, &KERNEL); }
// ---------------------------------------------------------------------------------------------
namespace detail {
union Arg { void* p; long long i; double f; };
struct ArgDesc { char kind; Arg value; };   // kind: 'a' array, 'i' integer, 'f' float
int launch_begin(int argc, char** argv, ArgDesc** args, int* nargs);
[[noreturn]] void bad_argument(int index, const char* want, char got);
[[noreturn]] void bad_argument_count(int want, int got);
void run_grid(void (*entry)(const void*), const void* ctx);
int launch_end();

template <class T> void check_arg(const ArgDesc& a, int i) {
    static_assert(std::is_pointer<T>::value || std::is_arithmetic<T>::value,
                  "the emulator passes only pointers, integers and floats to a kernel");
    if (std::is_pointer<T>::value && a.kind != 'a') bad_argument(i, "an array", a.kind);
    if (std::is_integral<T>::value && a.kind != 'i') bad_argument(i, "an integer", a.kind);
    if (std::is_floating_point<T>::value && a.kind == 'a') bad_argument(i, "a float", a.kind);
}
template <class T> T arg_as(const ArgDesc& a) {
    if constexpr (std::is_pointer<T>::value) return static_cast<T>(a.value.p);
    else if constexpr (std::is_integral<T>::value) return static_cast<T>(a.value.i);
    else return static_cast<T>(a.kind == 'i' ? (double)a.value.i : a.value.f);
}
template <class... Ts> struct Launch {
    void (*kernel)(Ts...);
    const ArgDesc* args;
    template <size_t... I> void call(std::index_sequence<I...>) const { kernel(arg_as<Ts>(args[I])...); }
    static void entry(const void* self) {
        static_cast<const Launch*>(self)->call(std::index_sequence_for<Ts...>{});
    }
};
template <class... Ts, size_t... I> void check_args(const ArgDesc* a, std::index_sequence<I...>) {
    (check_arg<Ts>(a[I], (int)I), ...);
}
}  // namespace detail

template <class... Ts> int run_main(int argc, char** argv, void (*kernel)(Ts...)) {
    detail::ArgDesc* args;
    int nargs;
    if (int rc = detail::launch_begin(argc, argv, &args, &nargs)) return rc;
    if (nargs != (int)sizeof...(Ts)) detail::bad_argument_count((int)sizeof...(Ts), nargs);
    detail::check_args<Ts...>(args, std::index_sequence_for<Ts...>{});
    detail::Launch<Ts...> launch{kernel, args};
    detail::run_grid(&detail::Launch<Ts...>::entry, &launch);
    return detail::launch_end();
}
}  // namespace emu
