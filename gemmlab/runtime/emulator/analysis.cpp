// analysis.cpp: the emulator's analysis mode. Counts, from a real kernel run on the CPU, what the
// chapters teach: 32-byte sectors per warp-wide global-memory request and wavefronts (bank-conflict
// passes) per warp-wide shared-memory request.
//
// How (gemmlab/runtime/cpu.py analyze()):
// - The kernel's translation unit (and only it) is compiled with -fsanitize=thread, so g++ puts a
//   call to __tsan_read4(p), __tsan_write16(p), ... before every load and store that survives
//   optimisation. The TSan runtime is NOT linked: this file defines those callbacks. The runtime
//   (runtime.cpp) and this file are compiled without the flag, so nothing of theirs is counted.
// - A callback classifies the address: inside a mapped array argument = global memory; inside the
//   block's dynamic arena or the kernel's static __shared__ variables (thread-local storage of the
//   OS thread that runs the block) = shared memory; anything else (stack, locals, heap) is ignored.
//   It appends (call site = its return address, address, size) to the running fiber's log.
// - ldmatrix and cp.async twins report their shared / global accesses through AnalysisHooks.
// - When every lane of a warp is in step (a __syncthreads(), a full-warp collective, the end of
//   the block), the warp's logs are grouped into warp-wide requests: the n-th entry of each lane
//   for one (call site, space) since the last such point forms request n. Lanes that did not
//   execute the instruction (a guard, an early return) simply do not contribute.
// - Sectors: distinct 32-byte sectors over the lanes' byte ranges, relative to the array's start
//   (cudaMalloc returns 256-byte aligned memory; the emulator's arrays are only 16-byte aligned).
// - Wavefronts: 32 banks of 4 bytes. Accesses of <= 4 bytes: one phase of 32 lanes; 8 bytes: two
//   phases of 16 lanes; 16 bytes (and ldmatrix rows, cp.async's shared side): four phases of 8
//   lanes (for ldmatrix, one phase per 8x8 matrix). A phase costs max over banks of the number of
//   DISTINCT 4-byte words the phase's lanes touch in that bank (same word = broadcast); a request
//   costs the sum over its phases that have an active lane.
// Results go to the file named by GEMMLAB_ANALYSIS; GEMMLAB_ANALYSIS_BLOCKS caps the blocks run.
#include "cuda_shim.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <link.h>
#include <unistd.h>

namespace emu {
namespace detail {
namespace {

enum Op : uint8_t { GLD, GST, SLD, SST, LDSM, CPA_G, CPA_S, NOPS };
const char* const kOpName[NOPS] = {"global load", "global store", "shared load", "shared store",
                                   "shared ldmatrix", "global cp.async", "shared cp.async"};
const uint8_t kStatic = 0xFE, kDynamic = 0xFF;  // region of a shared access; else the array index
const int kGlobalShift = 44;                    // global address = (array + 1) << 44 | offset

struct Entry {
    uintptr_t pc;
    uintptr_t addr;
    uint32_t size;
    uint8_t op;
    uint8_t region;
};

struct Request {
    uint32_t mask;
    uint32_t size[32];
    uintptr_t addr[32];
};

struct Stat {
    long long requests = 0, lanes = 0, bytes = 0, units = 0, min = -1, max = 0;
    uint8_t region = 0;
    uintptr_t sample = 0;  // offset (in its array / the arena / the TLS block) of a first access
};

struct SiteWork {
    uintptr_t pc;
    uint8_t op, region;
    uintptr_t sample;
    std::vector<Request> reqs;
    size_t used = 0, cursor = 0;
};

uint64_t site_key(uintptr_t pc, uint8_t op) { return (uint64_t)pc * NOPS + op; }

// Launch-wide: the array arguments (read-only once the grid starts) and the merged results.
AnalysisArray g_arrays[64];
int g_narrays = 0;
long long g_max_blocks = 0, g_blocks_total = 0;
std::mutex g_mutex;
std::unordered_map<uint64_t, Stat> g_stats;
long long g_blocks = 0, g_barriers = 0, g_warp_barriers = 0;

struct WorkerState {
    int nthreads = 0;
    std::vector<std::vector<Entry>> logs;  // per thread of the block
    uintptr_t smem_lo = 0, smem_bytes = 0;  // dynamic shared memory arena
    uintptr_t tls_lo = 0, tls_bytes = 0;    // this OS thread's TLS block of the executable
    uintptr_t rt_lo[8], rt_bytes[8];        // the runtime's own thread-locals inside it
    int nrt = 0;
    std::vector<SiteWork> work;
    std::unordered_map<uint64_t, size_t> work_index;
    std::unordered_map<uint64_t, Stat> stats;
    long long blocks = 0, barriers = 0, warp_barriers = 0;
};
__thread WorkerState* S;

// ---------------------------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------------------------
inline bool classify_shared(const WorkerState* s, uintptr_t a, uint8_t* region) {
    if (a - s->smem_lo < s->smem_bytes) { *region = kDynamic; return true; }
    if (a - s->tls_lo < s->tls_bytes) {
        for (int i = 0; i < s->nrt; ++i)
            if (a - s->rt_lo[i] < s->rt_bytes[i]) return false;
        *region = kStatic;
        return true;
    }
    return false;
}

inline bool classify_global(uintptr_t a, uintptr_t* enc, uint8_t* region) {
    for (int i = 0; i < g_narrays; ++i) {
        uintptr_t off = a - (uintptr_t)g_arrays[i].start;
        if (off < g_arrays[i].nbytes) {
            *enc = ((uintptr_t)(i + 1) << kGlobalShift) | off;
            *region = (uint8_t)i;
            return true;
        }
    }
    return false;
}

inline void push(WorkerState* s, uintptr_t pc, uintptr_t addr, uint32_t size, uint8_t op, uint8_t region) {
    s->logs[current->tid].push_back(Entry{pc, addr, size, op, region});
}

inline void record(uintptr_t pc, const void* p, uint32_t size, bool write) {
    WorkerState* s = S;
    if (!s || in_collective || !current) return;
    uintptr_t a = (uintptr_t)p, enc;
    uint8_t region;
    if (classify_shared(s, a, &region)) push(s, pc, a, size, write ? SST : SLD, region);
    else if (classify_global(a, &enc, &region)) push(s, pc, enc, size, write ? GST : GLD, region);
}

// ---------------------------------------------------------------------------------------------
// Counting one request
// ---------------------------------------------------------------------------------------------
thread_local std::vector<uintptr_t> t_scratch;  // sector or word numbers of one request

long long count_sectors(const Request& r) {
    std::vector<uintptr_t>& v = t_scratch;
    v.clear();
    for (int l = 0; l < 32; ++l) {
        if (!(r.mask >> l & 1u)) continue;
        uintptr_t first = r.addr[l] >> 5, last = (r.addr[l] + std::max(r.size[l], 1u) - 1) >> 5;
        for (uintptr_t sct = first; sct <= last; ++sct) v.push_back(sct);
    }
    std::sort(v.begin(), v.end());
    return std::unique(v.begin(), v.end()) - v.begin();
}

// Wavefronts under the bank rule; `lanes_per_phase` 32, 16 or 8.
long long count_wavefronts(const Request& r, int lanes_per_phase) {
    long long total = 0;
    for (int p0 = 0; p0 < 32; p0 += lanes_per_phase) {
        std::vector<uintptr_t>& v = t_scratch;
        v.clear();
        for (int l = p0; l < p0 + lanes_per_phase; ++l) {
            if (!(r.mask >> l & 1u)) continue;
            uintptr_t first = r.addr[l] >> 2, last = (r.addr[l] + std::max(r.size[l], 1u) - 1) >> 2;
            for (uintptr_t w = first; w <= last; ++w) v.push_back(w);
        }
        if (v.empty()) continue;
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        int per_bank[32] = {0}, most = 0;
        for (uintptr_t w : v) most = std::max(most, ++per_bank[w & 31]);
        total += most;
    }
    return total;
}

long long count_units(const Request& r, uint8_t op) {
    if (op == GLD || op == GST || op == CPA_G) return count_sectors(r);
    if (op == LDSM || op == CPA_S) return count_wavefronts(r, 8);
    uint32_t size = 0;
    for (int l = 0; l < 32; ++l)
        if (r.mask >> l & 1u) size = std::max(size, r.size[l]);
    return count_wavefronts(r, size <= 4 ? 32 : size <= 8 ? 16 : 8);
}

// ---------------------------------------------------------------------------------------------
// Grouping a warp's logs into requests
// ---------------------------------------------------------------------------------------------
void flush_warp(WorkerState* s, int warp) {
    int lo = warp * 32, hi = std::min(s->nthreads, lo + 32);
    bool any = false;
    for (int t = lo; t < hi && !any; ++t) any = !s->logs[t].empty();
    if (!any) return;
    for (SiteWork& w : s->work) w.used = 0;
    for (int t = lo; t < hi; ++t) {
        std::vector<Entry>& log = s->logs[t];
        if (log.empty()) continue;
        unsigned lane = (unsigned)(t - lo);
        for (SiteWork& w : s->work) w.cursor = 0;
        uint64_t last_key = ~0ull;
        SiteWork* w = nullptr;
        for (const Entry& e : log) {
            uint64_t key = site_key(e.pc, e.op);
            if (key != last_key) {
                auto it = s->work_index.find(key);
                if (it == s->work_index.end()) {
                    it = s->work_index.emplace(key, s->work.size()).first;
                    s->work.push_back(SiteWork{});
                    SiteWork& nw = s->work.back();
                    nw.pc = e.pc;
                    nw.op = e.op;
                    nw.region = e.region;
                    nw.sample = e.addr;
                }
                w = &s->work[it->second];
                last_key = key;
            }
            if (w->cursor == w->used) {
                if (w->used == w->reqs.size()) w->reqs.emplace_back();
                w->reqs[w->used++].mask = 0;
            }
            Request& r = w->reqs[w->cursor++];
            r.mask |= 1u << lane;
            r.addr[lane] = e.addr;
            r.size[lane] = e.size;
        }
        log.clear();
    }
    for (SiteWork& w : s->work) {
        if (!w.used) continue;
        Stat& st = s->stats[site_key(w.pc, w.op)];
        if (st.requests == 0) {  // where a first access went, as an offset (names the variable)
            st.region = w.region;
            st.sample = w.region == kStatic ? w.sample - s->tls_lo
                      : w.region == kDynamic ? w.sample - s->smem_lo
                      : w.sample & (((uintptr_t)1 << kGlobalShift) - 1);
        }
        for (size_t i = 0; i < w.used; ++i) {
            const Request& r = w.reqs[i];
            long long units = count_units(r, w.op), bytes = 0;
            for (int l = 0; l < 32; ++l)
                if (r.mask >> l & 1u) bytes += r.size[l];
            st.requests++;
            st.lanes += __builtin_popcount(r.mask);
            st.bytes += bytes;
            st.units += units;
            st.min = st.min < 0 ? units : std::min(st.min, units);
            st.max = std::max(st.max, units);
        }
    }
}

void flush_all(WorkerState* s) {
    for (int w = 0; w * 32 < s->nthreads; ++w) flush_warp(s, w);
}

// ---------------------------------------------------------------------------------------------
// Hooks called by runtime.cpp
// ---------------------------------------------------------------------------------------------
long long hook_max_blocks(long long nblocks) {
    g_blocks_total = nblocks;
    return g_max_blocks > 0 ? std::min(nblocks, g_max_blocks) : nblocks;
}

void hook_launch(const AnalysisArray* arrays, int n) {
    g_narrays = std::min(n, 64);
    for (int i = 0; i < g_narrays; ++i) g_arrays[i] = arrays[i];
}

int find_tls(struct dl_phdr_info* info, size_t, void* data) {
    WorkerState* s = static_cast<WorkerState*>(data);
    for (int i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_TLS && info->dlpi_tls_data) {
            s->tls_lo = (uintptr_t)info->dlpi_tls_data;
            s->tls_bytes = info->dlpi_phdr[i].p_memsz;
        }
    return 1;  // the first object is the executable
}

template <class T> void exclude(WorkerState* s, const T* p) {
    s->rt_lo[s->nrt] = (uintptr_t)p;
    s->rt_bytes[s->nrt++] = sizeof(T);
}

void hook_worker_begin(int nthreads, const char* smem, size_t smem_bytes) {
    WorkerState* s = new WorkerState;
    s->nthreads = nthreads;
    s->logs.resize(nthreads);
    s->smem_lo = (uintptr_t)smem;
    s->smem_bytes = smem_bytes;
    dl_iterate_phdr(find_tls, s);
    // The runtime's thread-locals share the TLS block with the kernel's __shared__ variables:
    // those the kernel's code can touch (through the shim) are not shared memory.
    exclude(s, &threadIdx);
    exclude(s, &blockIdx);
    exclude(s, &blockDim);
    exclude(s, &gridDim);
    exclude(s, &current);
    exclude(s, &dynamic_smem_base);
    exclude(s, &in_collective);
    exclude(s, &detail::async_states);
    S = s;
}

void hook_block_begin() {}

void hook_barrier() {
    WorkerState* s = S;
    flush_all(s);
    s->barriers++;
    s->warp_barriers += (s->nthreads + 31) / 32;
}

void hook_warp_sync(Warp& w) {
    // Only when every live lane is here: a partial-mask collective leaves the others running.
    if ((w.arrived_mask & w.live_mask) != w.live_mask) return;
    WorkerState* s = S;
    flush_warp(s, (int)(w.lanes[0]->tid / 32));
}

void hook_block_end() {
    WorkerState* s = S;
    flush_all(s);
    s->blocks++;
}

void hook_worker_end() {
    WorkerState* s = S;
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto& kv : s->stats) {
        Stat& g = g_stats[kv.first];
        const Stat& o = kv.second;
        if (g.requests == 0) {
            g.region = o.region;
            g.sample = o.sample;
        }
        g.requests += o.requests;
        g.lanes += o.lanes;
        g.bytes += o.bytes;
        g.units += o.units;
        g.min = g.min < 0 ? o.min : std::min(g.min, o.min);
        g.max = std::max(g.max, o.max);
    }
    g_blocks += s->blocks;
    g_barriers += s->barriers;
    g_warp_barriers += s->warp_barriers;
    S = nullptr;
    delete s;
}

void hook_finish() {
    const char* path = getenv("GEMMLAB_ANALYSIS");
    FILE* out = path ? fopen(path, "w") : nullptr;
    if (!out) {
        fprintf(stderr, "gemmlab-emulator: cannot write the analysis results to %s\n", path ? path : "(unset)");
        _exit(81);
    }
    fprintf(out, "gemmlab-analysis 1\nblocks %lld %lld\nbarriers %lld %lld\n", g_blocks, g_blocks_total,
            g_barriers, g_warp_barriers);
    std::vector<std::pair<uint64_t, Stat>> sites(g_stats.begin(), g_stats.end());
    std::sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& kv : sites) {
        const Stat& st = kv.second;
        uintptr_t pc = (uintptr_t)(kv.first / NOPS);
        int op = (int)(kv.first % NOPS);
        char region[64];
        if (st.region == kStatic) snprintf(region, sizeof region, "static %zu", (size_t)st.sample);
        else if (st.region == kDynamic) snprintf(region, sizeof region, "dynamic %zu", (size_t)st.sample);
        else snprintf(region, sizeof region, "arg%d %zu", g_arrays[st.region].arg, (size_t)st.sample);
        fprintf(out, "site 0x%zx %d %s %lld %lld %lld %lld %lld %lld\n", (size_t)pc, op, region, st.requests,
                st.lanes, st.bytes, st.units, st.min, st.max);
    }
    fclose(out);
}

void hook_cp_async(const void* pc, const void* smem_dst, const void* gmem_src, int src_bytes) {
    WorkerState* s = S;
    if (!s) return;
    uintptr_t enc;
    uint8_t region;
    if (src_bytes > 0 && classify_global((uintptr_t)gmem_src, &enc, &region))
        push(s, (uintptr_t)pc, enc, (uint32_t)src_bytes, CPA_G, region);
    if (classify_shared(s, (uintptr_t)smem_dst, &region)) push(s, (uintptr_t)pc, (uintptr_t)smem_dst, 16, CPA_S, region);
}

void hook_ldmatrix(const void* pc, const void* row, int) {
    WorkerState* s = S;
    uint8_t region;
    if (s && classify_shared(s, (uintptr_t)row, &region)) push(s, (uintptr_t)pc, (uintptr_t)row, 16, LDSM, region);
}

AnalysisHooks g_hooks = {hook_max_blocks, hook_launch, hook_worker_begin, hook_block_begin, hook_barrier,
                         hook_warp_sync, hook_block_end, hook_worker_end, hook_finish, hook_cp_async,
                         hook_ldmatrix};

struct Register {
    Register() {
        if (!getenv("GEMMLAB_ANALYSIS")) return;
        if (const char* b = getenv("GEMMLAB_ANALYSIS_BLOCKS")) g_max_blocks = atoll(b);
        analysis = &g_hooks;
    }
} g_register;

}  // namespace
}  // namespace detail
}  // namespace emu

// ---------------------------------------------------------------------------------------------
// The ThreadSanitizer entry points g++ calls from the instrumented kernel. The return address is
// the call site: the instruction right after the call, inside the kernel's code.
// ---------------------------------------------------------------------------------------------
using emu::detail::record;
#define EMU_PC ((uintptr_t)__builtin_return_address(0))

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}

#define EMU_TSAN_ACCESS(N)                                                                  \
    void __tsan_read##N(void* p) { record(EMU_PC, p, N, false); }                           \
    void __tsan_write##N(void* p) { record(EMU_PC, p, N, true); }                           \
    void __tsan_unaligned_read##N(void* p) { record(EMU_PC, p, N, false); }                 \
    void __tsan_unaligned_write##N(void* p) { record(EMU_PC, p, N, true); }                 \
    void __tsan_volatile_read##N(void* p) { record(EMU_PC, p, N, false); }                  \
    void __tsan_volatile_write##N(void* p) { record(EMU_PC, p, N, true); }                  \
    void __tsan_unaligned_volatile_read##N(void* p) { record(EMU_PC, p, N, false); }        \
    void __tsan_unaligned_volatile_write##N(void* p) { record(EMU_PC, p, N, true); }        \
    void __tsan_read##N##_pc(void* p, void* pc) { record((uintptr_t)pc, p, N, false); }     \
    void __tsan_write##N##_pc(void* p, void* pc) { record((uintptr_t)pc, p, N, true); }
EMU_TSAN_ACCESS(1)
EMU_TSAN_ACCESS(2)
EMU_TSAN_ACCESS(4)
EMU_TSAN_ACCESS(8)
EMU_TSAN_ACCESS(16)
#undef EMU_TSAN_ACCESS

void __tsan_read_range(void* p, unsigned long size) { record(EMU_PC, p, (uint32_t)size, false); }
void __tsan_write_range(void* p, unsigned long size) { record(EMU_PC, p, (uint32_t)size, true); }

// Atomics: the instrumented kernel calls these instead of doing the operation itself, so they must
// do it (sequentially consistent, whatever order was asked for). They are not counted.
#define EMU_TSAN_ATOMIC(N, T)                                                                              \
    T __tsan_atomic##N##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }   \
    void __tsan_atomic##N##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }   \
    T __tsan_atomic##N##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##N##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##N##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##N##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##N##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }   \
    T __tsan_atomic##N##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##N##_fetch_nand(volatile T* a, T v, int) { return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST); } \
    int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                  \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);            \
    }                                                                                                      \
    int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                    \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
    }                                                                                                      \
    T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                        \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                  \
        return c;                                                                                          \
    }
EMU_TSAN_ATOMIC(8, unsigned char)
EMU_TSAN_ATOMIC(16, unsigned short)
EMU_TSAN_ATOMIC(32, unsigned int)
EMU_TSAN_ATOMIC(64, unsigned long long)
#undef EMU_TSAN_ATOMIC
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}
