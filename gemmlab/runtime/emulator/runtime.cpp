// runtime.cpp: the emulator's scheduler, context switch and launch driver (compiled once, cached).
//
// A launch runs in its own process (gemmlab/runtime/cpu.py starts it): blocks are handed out to a few OS
// threads through an atomic counter; on each OS thread the block's CUDA threads are fibers that
// switch only at __syncthreads() and warp collectives. Any error prints one line on stderr that
// starts with "gemmlab-emulator:" and exits with a code from the table below.
#include "cuda_shim.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

// Exit codes read by gemmlab/runtime/cpu.py.
enum : int { EXIT_BAD_LAUNCH = 81, EXIT_DEADLOCK = 82, EXIT_MEMORY = 83, EXIT_STACK = 84, EXIT_ARITH = 85 };

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

namespace emu {
namespace detail {

__thread Fiber* current;
__thread char* dynamic_smem_base;
__thread int in_collective;
__thread long long mbarrier_events;
AnalysisHooks* analysis;  // set by analysis.cpp's static initializer in an analysis build

namespace {

const size_t kPage = 4096;

[[noreturn]] void fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void fail(int code, const char* fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "gemmlab-emulator: %s\n", buf);
    fflush(stderr);
    _exit(code);
}

// ---------------------------------------------------------------------------------------------
// Context switch. x86-64: save the callee-saved registers, MXCSR and the x87 control word on the
// old stack, swap stack pointers, restore from the new stack. Elsewhere: ucontext (slower).
// ---------------------------------------------------------------------------------------------
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
extern "C" void emu_switch(void** save_sp, void* load_sp);
extern "C" void emu_fiber_start();
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch

    .globl emu_fiber_start
    .type emu_fiber_start, @function
emu_fiber_start:
    callq *%r13
    ud2
    .size emu_fiber_start, .-emu_fiber_start
)");

struct Context { void* sp; };

// A fresh stack whose first switch "returns" into emu_fiber_start, which calls entry().
void make_context(Fiber* f, Context&, char* stack_lo, size_t size, void (*entry)()) {
    char* top = stack_lo + size;  // page aligned
    void** sp = reinterpret_cast<void**>(top - 80);
    unsigned mxcsr;
    unsigned short fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    std::memcpy(sp, &mxcsr, 4);
    std::memcpy(reinterpret_cast<char*>(sp) + 4, &fpucw, 2);
    sp[1] = nullptr;                                   // r15
    sp[2] = nullptr;                                   // r14
    sp[3] = reinterpret_cast<void*>(entry);            // r13
    sp[4] = nullptr;                                   // r12
    sp[5] = nullptr;                                   // rbx
    sp[6] = nullptr;                                   // rbp
    sp[7] = reinterpret_cast<void*>(&emu_fiber_start); // return address; rsp is then 16-aligned
    f->sp = sp;
}
inline void switch_in(Fiber* f, Context&, Context& sched) { emu_switch(&sched.sp, f->sp); }
inline void switch_out(Fiber* f, Context&, Context& sched) { emu_switch(&f->sp, sched.sp); }
#else
struct Context { ucontext_t uc; };
void make_context(Fiber*, Context& c, char* stack_lo, size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack_lo;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
inline void switch_in(Fiber*, Context& c, Context& sched) { swapcontext(&sched.uc, &c.uc); }
inline void switch_out(Fiber*, Context& c, Context& sched) { swapcontext(&c.uc, &sched.uc); }
#endif

// ---------------------------------------------------------------------------------------------
// Launch description (written by gemmlab/runtime/cpu.py) and the argument arrays
// ---------------------------------------------------------------------------------------------
// A region is right-aligned against its upper guard; the bytes between the guards that are not the array's
// (slack: the rest of the first page before it, the alignment padding after it) hold kSlackByte. A read there
// gives NaN (0xFFFF is a NaN in fp16, 0xFFFFFFFF in fp32), so a result that used it fails the check; a write there
// is found after the launch (check_slack). A guard of 16 MB on each side catches strays far from every array.
const size_t kGuard = 16u << 20;
const unsigned char kSlackByte = 0xFF;

struct Region {          // one mapping with a PROT_NONE guard of kGuard bytes on each side
    char* lo;            // start of the lower guard
    char* start;         // first byte handed to the kernel (16-byte aligned, right-aligned)
    size_t nbytes;
    char* hi;            // end of the upper guard
    char* body_lo() const { return lo + kGuard; }
    char* body_hi() const { return hi - kGuard; }
};

Region map_region(size_t nbytes, size_t align) {
    size_t padded = (nbytes + align - 1) / align * align;
    size_t pages = (padded + kPage - 1) / kPage * kPage;
    size_t total = pages + 2 * kGuard;
    char* base = static_cast<char*>(mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (base == MAP_FAILED) fail(EXIT_BAD_LAUNCH, "cannot map %zu bytes", nbytes);
    if (pages && mprotect(base + kGuard, pages, PROT_READ | PROT_WRITE) != 0)
        fail(EXIT_BAD_LAUNCH, "cannot map %zu bytes", nbytes);
    Region r{base, base + kGuard + pages - padded, nbytes, base + total};
    std::memset(r.body_lo(), kSlackByte, r.start - r.body_lo());
    std::memset(r.start + nbytes, kSlackByte, r.body_hi() - (r.start + nbytes));
    return r;
}

// The byte offset (from start) of the first slack byte a kernel wrote, or 0 if none was written.
std::ptrdiff_t slack_written(const Region& r) {
    for (const char* p = r.body_lo(); p < r.start; ++p)
        if ((unsigned char)*p != kSlackByte) return p - r.start;
    for (const char* p = r.start + r.nbytes; p < r.body_hi(); ++p)
        if ((unsigned char)*p != kSlackByte) return p - r.start;
    return 0;
}

struct ArrayArg { int arg; long long offset; Region region; };

struct LaunchDesc {
    dim3 grid, block;
    size_t smem = 0;
    int workers = 1;  // OS threads running blocks: gemmlab/runtime/cpu.py's cpu_threads(), parsed there only
    std::string data_path;
    std::vector<ArgDesc> args;
    std::vector<ArrayArg> arrays;
    size_t stack_size = 64 * 1024;
    dim3 cluster;  // blocks per cluster (__cluster_dims__, GEMMLAB_CPU_CLUSTER from gemmlab/runtime/cpu.py): 1 x 1 x 1 without
};
LaunchDesc g_launch;
void (*g_entry)(const void*);
const void* g_ctx;

// ---------------------------------------------------------------------------------------------
// Per-OS-thread state: the fibers of the block it runs
// ---------------------------------------------------------------------------------------------
struct Copy { void* dst; const void* src; int bytes; int group; };
const int kMaxCluster = 16;       // the most blocks a cluster may have (16 with the non-portable opt-in)
const int kClusterBarrier = 16;   // Fiber::bar_id of a thread waiting in cluster_sync()
struct AsyncQueue { std::vector<Copy> copies; int open_group = 0; };

struct Worker {
    int nthreads = 0;
    std::vector<Fiber> fibers;
    std::vector<Context> contexts;
    std::vector<Warp> warps;
    std::vector<AsyncQueue> async;
    Context sched;
    char* stacks = nullptr;
    size_t stack_stride = 0;   // guard page + stack
    Region smem{};
    int exited = 0;
    // the 16 hardware barriers of each block: 0 is __syncthreads(), 1..15 named (bar.sync id, count)
    int bar_arrived[kMaxCluster][16] = {}, bar_line[kMaxCluster][16] = {};
    bool bar_divergent[kMaxCluster][16] = {};
    // A cluster of csize blocks runs here at once: the block of rank r has fibers r * nthreads ..
    // + nthreads - 1 (tid is that slot), its own shared memory, blockIdx and barriers.
    int csize = 1;
    int nfibers = 0;                  // csize * nthreads
    std::vector<Region> cta_smem;     // cta_smem[0] is smem
    uint3 cta_block[kMaxCluster] = {};
    int cta_exited[kMaxCluster] = {};
    int cluster_arrived = 0;          // threads waiting at barrier.cluster (bar_id kClusterBarrier)
};
__thread Worker* W;

// Read by the signal handler: where every worker's stacks and arena are.
const int kMaxWorkers = 256;
Worker* g_workers[kMaxWorkers];

void fiber_entry() {
    Fiber* f = current;
    g_entry(g_ctx);
    async_thread_exit();  // a TMA store still pending when its thread returns is an error (cuda_shim.h)
    Worker& w = *W;
    f->state = EXITED;
    w.exited++;
    w.cta_exited[f->cta]++;
    Warp& warp = *f->warp;
    warp.live_mask &= ~(1u << f->lane);
    if (warp.arrived_mask && (warp.arrived_mask & warp.live_mask) == (warp.wait_mask & warp.live_mask))
        warp_finish(warp);
    switch_out(f, w.contexts[f->tid], w.sched);
    __builtin_unreachable();
}

std::string thread_list(const std::vector<unsigned>& ids) {
    // "0-15, 32-47" for runs, at most 8 items then "...".
    std::string s;
    size_t items = 0;
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (items == 8) { s += ", ..."; break; }
        if (!s.empty()) s += ", ";
        s += std::to_string(ids[i]);
        if (j > i) s += "-" + std::to_string(ids[j]);
        ++items;
        i = j + 1;
    }
    return s;
}

[[noreturn]] void report_deadlock() {
    Worker& w = *W;
    std::vector<std::pair<int, std::vector<unsigned>>> barrier, named, warp, spin, cluster;  // line -> threads
    std::vector<unsigned> exited;
    auto add = [](std::vector<std::pair<int, std::vector<unsigned>>>& groups, int line, unsigned tid) {
        for (auto& g : groups)
            if (g.first == line) { g.second.push_back(tid); return; }
        groups.push_back({line, {tid}});
    };
    for (Fiber& f : w.fibers) {
        if (f.state == AT_BARRIER && f.bar_id == kClusterBarrier) add(cluster, f.line, f.tid);
        else if (f.state == AT_BARRIER) add(f.bar_id ? named : barrier, f.line, f.tid);
        else if (f.state == AT_WARP) add(warp, f.line, f.tid);
        else if (f.state == AT_SPIN) add(spin, f.line, f.tid);
        else if (f.state == EXITED) exited.push_back(f.tid);
    }
    std::string what = !spin.empty() ? "an mbarrier phase that nothing is left to complete (too few arrivals or bytes, or a wrong parity)"
                     : !cluster.empty() && barrier.empty() && named.empty() && warp.empty()
                         ? "a cluster barrier (cluster_sync) that some threads of the cluster never reached"
                     : !warp.empty() ? "a warp collective (shuffle, ballot, __syncwarp, ldmatrix, mma) that some lanes never reached"
                     : barrier.empty() && !named.empty() ? "a named barrier (bar.sync id, count) that fewer than count threads reached"
                                     : "divergent __syncthreads(): every thread of the block must reach the same barrier";
    std::string detail;
    const std::pair<decltype(&barrier), const char*> waits[] = {
        {&barrier, "at __syncthreads()"}, {&named, "at a named barrier (bar.sync)"}, {&warp, "at a warp collective"},
        {&spin, "on an mbarrier"}, {&cluster, "at a cluster barrier"}};
    for (auto& [groups, where] : waits)
        for (auto& g : *groups)
            detail += "; " + std::to_string(g.second.size()) + " threads wait " + where + " on line " +
                      std::to_string(g.first) + " (threads " + thread_list(g.second) + ")";
    if (!exited.empty())
        detail += "; " + std::to_string(exited.size()) + " threads have exited (threads " + thread_list(exited) + ")";
    if (w.csize > 1) {
        const uint3 b = w.cta_block[0];
        fail(EXIT_DEADLOCK, "deadlock in the cluster of %d blocks from block (%u,%u,%u) (thread t of rank r is listed as "
             "r * %d + t): %s%s", w.csize, b.x, b.y, b.z, w.nthreads, what.c_str(), detail.c_str());
    }
    fail(EXIT_DEADLOCK, "deadlock in block (%u,%u,%u): %s%s", blockIdx.x, blockIdx.y, blockIdx.z, what.c_str(), detail.c_str());
}

void run_block(uint3 b) {  // the block at b, and with a cluster the rest of the cluster after it
    Worker& w = *W;
    blockIdx = b;
    const dim3 cl = g_launch.cluster;
    for (int r = 0; r < w.csize; ++r) {
        w.cta_block[r] = uint3{b.x + r % cl.x, b.y + r / cl.x % cl.y, b.z + r / (cl.x * cl.y)};
        w.cta_exited[r] = 0;
        for (int i = 0; i < 16; ++i) w.bar_arrived[r][i] = 0, w.bar_divergent[r][i] = false;
    }
    w.cluster_arrived = 0;
    w.exited = 0;
    for (Warp& warp : w.warps) {
        warp.live_mask = warp.nlanes == 32 ? 0xffffffffu : (1u << warp.nlanes) - 1;
        warp.arrived_mask = 0;
    }
    if (analysis) analysis->block_begin();
    for (int i = 0; i < w.nfibers; ++i) {
        Fiber& f = w.fibers[i];
        f.state = RUNNABLE;
        w.async[i].copies.clear();
        w.async[i].open_group = 0;
        make_context(&f, w.contexts[i], w.stacks + i * w.stack_stride + kPage, w.stack_stride - kPage, &fiber_entry);
    }
    for (;;) {
        // Progress: a runnable fiber ran, a spinning one got past its wait (it stopped somewhere else:
        // it may have woken fibers already passed over in this sweep), or a spinning one found its
        // mbarrier changed (mbarrier operations count themselves in mbarrier_events). Spinners alone,
        // with nothing changed: deadlock.
        bool ran = false;
        const long long events = mbarrier_events;
        for (int i = 0; i < w.nfibers; ++i) {
            Fiber* f = &w.fibers[i];
            if (f->state != RUNNABLE && f->state != AT_SPIN) continue;
            if (f->state == RUNNABLE) ran = true;
            f->state = RUNNABLE;  // a spinner re-checks its barrier
            current = f;
            threadIdx = f->thread_idx;
            if (w.csize > 1) {  // the fiber's own block
                blockIdx = w.cta_block[f->cta];
                dynamic_smem_base = w.cta_smem[f->cta].start;
            }
            switch_in(f, w.contexts[i], w.sched);
            if (f->state != AT_SPIN) ran = true;
        }
        ran = ran || mbarrier_events != events;
        if (w.exited == w.nfibers) {
            if (analysis) analysis->block_end();
            return;
        }
        if (!ran) report_deadlock();
    }
}

void setup_worker(Worker& w, int id) {
    const LaunchDesc& L = g_launch;
    int n = (int)(L.block.x * L.block.y * L.block.z);
    w.nthreads = n;
    w.csize = (int)(L.cluster.x * L.cluster.y * L.cluster.z);
    const int warps_per_block = (n + 31) / 32;
    const int nf = w.nfibers = w.csize * n;
    w.fibers.assign(nf, Fiber{});
    w.contexts.assign(nf, Context{});
    w.async.assign(nf, AsyncQueue{});
    w.warps.assign(w.csize * warps_per_block, Warp{});
    for (int slot = 0; slot < nf; ++slot) {
        const unsigned i = slot % n;  // the thread's index in its block
        Fiber& f = w.fibers[slot];
        f.tid = slot;
        f.cta = slot / n;
        f.lane = i % 32;
        f.thread_idx = uint3{i % L.block.x, i / L.block.x % L.block.y, i / (L.block.x * L.block.y)};
        Warp& warp = w.warps[f.cta * warps_per_block + i / 32];
        f.warp = &warp;
        warp.lanes[f.lane] = &f;
        warp.nlanes = f.lane + 1;
    }
    // One mapping for all stacks; a PROT_NONE page below each stack catches overflows.
    w.stack_stride = L.stack_size + kPage;
    size_t total = w.stack_stride * nf;
    w.stacks = static_cast<char*>(mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    if (w.stacks == MAP_FAILED) fail(EXIT_BAD_LAUNCH, "cannot map stacks for %d threads", nf);
    for (int i = 0; i < nf; ++i) mprotect(w.stacks + i * w.stack_stride, kPage, PROT_NONE);
    w.cta_smem.clear();
    for (int r = 0; r < w.csize; ++r) w.cta_smem.push_back(map_region(L.smem, 128));
    w.smem = w.cta_smem[0];
    dynamic_smem_base = w.smem.start;
    blockDim = L.block;
    gridDim = L.grid;
    g_workers[id] = &w;
    if (analysis && w.csize > 1) fail(EXIT_BAD_LAUNCH, "analysis mode does not model clusters (__cluster_dims__)");
    if (analysis) analysis->worker_begin(n, w.smem.start, w.smem.nbytes);
}

void install_signal_stack() {
    // Faults on a fiber stack (overflow) need another stack for the handler.
    static thread_local std::vector<char> alt(64 * 1024);
    stack_t ss{};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    sigaltstack(&ss, nullptr);
}

void worker_main(int id, std::atomic<long long>* next, long long nblocks) {
    Worker w;
    W = &w;
    install_signal_stack();
    setup_worker(w, id);
    const dim3 cl = g_launch.cluster;
    const dim3 g{g_launch.grid.x / cl.x, g_launch.grid.y / cl.y, g_launch.grid.z / cl.z};  // in clusters
    for (long long b; (b = next->fetch_add(1)) < nblocks;)  // b: a block, or a cluster's first block
        run_block(uint3{(unsigned)(b % g.x) * cl.x, (unsigned)(b / g.x % g.y) * cl.y,
                        (unsigned)(b / ((long long)g.x * g.y)) * cl.z});
    for (const Region& s : w.cta_smem)
        if (std::ptrdiff_t off = slack_written(s))
            fail(EXIT_MEMORY, "out-of-bounds write at byte offset %td of dynamic shared memory (%zu bytes), found "
                 "after the launch", off, s.nbytes);
    if (analysis) analysis->worker_end();
}

// ---------------------------------------------------------------------------------------------
// Faults: name the array, the thread and the code address (cpu.py turns it into a source line)
// ---------------------------------------------------------------------------------------------
void on_fault(int sig, siginfo_t* si, void* ucv) {
    char* addr = static_cast<char*>(si->si_addr);
    unsigned long long pc = 0;
    char* sp = nullptr;
    bool write = false;
#if defined(__x86_64__)
    auto* uc = static_cast<ucontext_t*>(ucv);
    pc = (unsigned long long)uc->uc_mcontext.gregs[REG_RIP];
    sp = reinterpret_cast<char*>(uc->uc_mcontext.gregs[REG_RSP]);
    write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)ucv;
#endif
    char where[512];
    uint3 t = current ? current->thread_idx : uint3{0, 0, 0};
    snprintf(where, sizeof where, "by thread (%u,%u,%u) of block (%u,%u,%u) [pc=0x%llx]", t.x, t.y, t.z,
             blockIdx.x, blockIdx.y, blockIdx.z, pc);
    const char* rw = write ? "write" : "read";
    if (sig == SIGFPE) fail(EXIT_ARITH, "arithmetic error (integer division by zero?) %s", where);
    if (sig == SIGILL) fail(EXIT_ARITH, "illegal instruction (an index outside a fixed-size array such as a __shared__ "
                                    "one, a __trap(), or a corrupted stack) %s", where);
    auto in = [addr](const char* lo, const char* hi) { return addr >= lo && addr < hi; };
    // A frame larger than the stack moves the stack pointer below the fiber's stack.
    if (current && W && sp && sp < W->stacks + current->tid * W->stack_stride + kPage)
        fail(EXIT_STACK, "a thread overflowed its %zu KB stack (large local arrays? set GEMMLAB_CPU_STACK_KB) %s",
             g_launch.stack_size / 1024, where);
    for (const ArrayArg& a : g_launch.arrays) {
        const Region& r = a.region;
        if (in(r.lo, r.hi))
            fail(EXIT_MEMORY, "out-of-bounds %s at byte offset %td of argument %d (an array of %zu bytes) %s",
                 rw, addr - r.start, a.arg, r.nbytes, where);
    }
    for (Worker* w : g_workers) {
        if (!w) continue;
        for (const Region& s : w->cta_smem)
            if (in(s.lo, s.hi))
                fail(EXIT_MEMORY, "out-of-bounds %s at byte offset %td of dynamic shared memory (%zu bytes) %s",
                     rw, addr - s.start, s.nbytes, where);
        if (in(w->stacks, w->stacks + w->stack_stride * w->nfibers) && (size_t)(addr - w->stacks) % w->stack_stride < kPage)
            fail(EXIT_STACK, "a thread overflowed its %zu KB stack (large local arrays? set GEMMLAB_CPU_STACK_KB) %s",
                 g_launch.stack_size / 1024, where);
    }
    if ((size_t)addr < 65536)
        fail(EXIT_MEMORY, "out-of-bounds %s at address %p (a null pointer?) %s", rw, (void*)addr, where);
    fail(EXIT_MEMORY, "out-of-bounds %s at address %p (outside every array) %s", rw, (void*)addr, where);
}

void install_fault_handlers() {
    struct sigaction sa{};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Barriers and warp collectives
// ---------------------------------------------------------------------------------------------
namespace {
// Wait at barrier `id` until `count` threads have arrived (bar_sync checked the operands; __syncthreads counts
// the whole block, which need not be a whole number of warps: a 4 x 4 or 31 x 31 block).
void bar_wait(int id, int count, int line) {
    Worker& w = *W;
    Fiber* f = current;
    f->line = line;
    f->bar_id = id;
    const unsigned r = f->cta;  // each block of a cluster has its own barriers
    if (w.bar_arrived[r][id] == 0) w.bar_line[r][id] = line;
    else if (line != w.bar_line[r][id]) w.bar_divergent[r][id] = true;
    // Every thread counted must arrive at the same barrier: an exited thread never does.
    if (++w.bar_arrived[r][id] == count && !w.bar_divergent[r][id]) {
        if (analysis) analysis->barrier();
        w.bar_arrived[r][id] = 0;
        for (Fiber& o : w.fibers)
            if (o.state == AT_BARRIER && o.bar_id == id && o.cta == r) o.state = RUNNABLE;
        return;
    }
    f->state = AT_BARRIER;
    switch_out(f, w.contexts[f->tid], w.sched);
}
}  // namespace

void bar_sync(int id, int count, int line) {
    if (id < 0 || id > 15 || count <= 0 || count % 32 != 0 || count > W->nthreads)
        fail(EXIT_BAD_LAUNCH, "bar.sync %d, %d on line %d: the barrier id must be 0..15 and the thread count a "
             "multiple of 32, at most the block's %d threads", id, count, line, W->nthreads);
    bar_wait(id, count, line);
}

void syncthreads(int line) { bar_wait(0, W->nthreads, line); }

// barrier.cluster.arrive + wait: every thread of every block of the cluster (an exited one never
// arrives, as at __syncthreads()); one block alone outside clusters.
void cluster_sync(int line) {
    Worker& w = *W;
    Fiber* f = current;
    f->line = line;
    f->bar_id = kClusterBarrier;
    if (++w.cluster_arrived == w.nfibers) {
        w.cluster_arrived = 0;
        for (Fiber& o : w.fibers)
            if (o.state == AT_BARRIER && o.bar_id == kClusterBarrier) o.state = RUNNABLE;
        return;
    }
    f->state = AT_BARRIER;
    switch_out(f, w.contexts[f->tid], w.sched);
}

unsigned cluster_size() { return (unsigned)W->csize; }

// The shared memory of the block of rank `cta` in this cluster, for a mapa'd access by `what`.
char* cluster_smem(unsigned cta, const char* what) {
    Worker& w = *W;
    if (cta >= (unsigned)w.csize)
        fail(EXIT_BAD_LAUNCH, "%s names block %u of a cluster of %d blocks (thread %u)", what, cta, w.csize, current->tid);
    if (w.cta_exited[cta] == w.nthreads)
        fail(EXIT_BAD_LAUNCH, "%s reaches block %u of its cluster, whose threads have all exited: its shared memory "
             "is gone (end the kernel with cluster_sync())", what, cta);
    return w.cta_smem[cta].start;
}

void spin_wait(int line) {
    Fiber* f = current;
    f->line = line;
    f->state = AT_SPIN;
    switch_out(f, W->contexts[f->tid], W->sched);
}

void misuse(const char* what) { fail(EXIT_BAD_LAUNCH, "%s", what); }

void* array_argument(int index) {
    for (const ArrayArg& a : g_launch.arrays)
        if (a.arg == index) return a.region.start;
    fail(EXIT_BAD_LAUNCH, "a tensor map names kernel argument %d, which is not an array", index);
}

void warp_wait(Fiber* f) {
    f->state = AT_WARP;
    switch_out(f, W->contexts[f->tid], W->sched);
}

void warp_finish(Warp& w) {
    if (analysis) analysis->warp_sync(w);
    in_collective = 1;
    w.complete(w);
    in_collective = 0;
    for (unsigned l = 0; l < w.nlanes; ++l)
        if (w.lanes[l]->state == AT_WARP) w.lanes[l]->state = RUNNABLE;  // arrived, or queued behind it
    w.arrived_mask = 0;
}

void warp_mismatch(Warp& w, int line) {
    fail(EXIT_DEADLOCK, "block (%u,%u,%u), warp %u: lanes reached different warp collectives at once (lines %d and %d): "
         "every lane of a warp must execute the same shuffle / ballot / ldmatrix / mma",
         blockIdx.x, blockIdx.y, blockIdx.z, current->tid / 32, w.line, line);
}

// ---------------------------------------------------------------------------------------------
// cp.async: per-thread queue of copies; a wait performs the copies of every completed group
// ---------------------------------------------------------------------------------------------
void cp_async_push(void* dst, const void* src, int src_bytes) {
    if (src_bytes < 0 || src_bytes > 16)
        fail(EXIT_BAD_LAUNCH, "cp_async_16 with src_bytes = %d (must be 0..16) by thread %u", src_bytes, current->tid);
    if (analysis) analysis->cp_async(__builtin_return_address(0), dst, src, src_bytes);
    AsyncQueue& q = W->async[current->tid];
    q.copies.push_back(Copy{dst, src, src_bytes, q.open_group});
}

__attribute__((noinline)) void note_ldmatrix(const void* row, int matrices) {
    if (analysis) analysis->ldmatrix(__builtin_return_address(0), row, matrices);
}

void cp_async_commit_group() { W->async[current->tid].open_group++; }

void cp_async_wait(int pending_groups) {
    AsyncQueue& q = W->async[current->tid];
    int done_below = q.open_group - pending_groups;  // groups older than this are complete
    size_t n = 0;
    for (; n < q.copies.size() && q.copies[n].group < done_below; ++n) {
        Copy& c = q.copies[n];
        std::memcpy(c.dst, c.src, c.bytes);
        std::memset(static_cast<char*>(c.dst) + c.bytes, 0, 16 - c.bytes);
    }
    q.copies.erase(q.copies.begin(), q.copies.begin() + n);
}

// ---------------------------------------------------------------------------------------------
// Launch driver
// ---------------------------------------------------------------------------------------------
void bad_argument(int index, const char* want, char got) {
    const char* g = got == 'a' ? "an array" : got == 'i' ? "an integer" : "a float";
    fail(EXIT_BAD_LAUNCH, "argument %d: the kernel expects %s but the launch passed %s", index, want, g);
}

void bad_argument_count(int want, int got) {
    fail(EXIT_BAD_LAUNCH, "the kernel takes %d arguments but the launch passed %d", want, got);
}

int launch_begin(int argc, char** argv, ArgDesc** args, int* nargs) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LAUNCH_FILE ARRAY_FILE (written by gemmlab/runtime/cpu.py)\n", argv[0]);
        return EXIT_BAD_LAUNCH;
    }
    FILE* in = fopen(argv[1], "r");
    if (!in) fail(EXIT_BAD_LAUNCH, "cannot read the launch description %s", argv[1]);
    LaunchDesc& L = g_launch;
    int n = 0;
    if (fscanf(in, " grid %u %u %u block %u %u %u smem %zu workers %d nargs %d", &L.grid.x, &L.grid.y, &L.grid.z,
               &L.block.x, &L.block.y, &L.block.z, &L.smem, &L.workers, &n) != 9 || L.workers < 1)
        fail(EXIT_BAD_LAUNCH, "malformed launch description %s", argv[1]);
    const char* path = argv[2];
    L.data_path = path;
    if (const char* kb = getenv("GEMMLAB_CPU_STACK_KB")) L.stack_size = (size_t)std::max(16L, atol(kb)) * 1024;
    for (int i = 0; i < n; ++i) {
        ArgDesc a{};
        char kind;
        if (fscanf(in, " %c", &kind) != 1) fail(EXIT_BAD_LAUNCH, "malformed argument %d", i);
        a.kind = kind;
        if (kind == 'a') {
            long long offset, nbytes;
            if (fscanf(in, "%lld %lld", &offset, &nbytes) != 2) fail(EXIT_BAD_LAUNCH, "malformed argument %d", i);
            L.arrays.push_back(ArrayArg{i, offset, map_region((size_t)nbytes, 16)});
            a.value.p = L.arrays.back().region.start;
        } else if (kind == 'i') {
            if (fscanf(in, "%lld", &a.value.i) != 1) fail(EXIT_BAD_LAUNCH, "malformed argument %d", i);
        } else if (kind == 'f') {
            if (fscanf(in, "%lf", &a.value.f) != 1) fail(EXIT_BAD_LAUNCH, "malformed argument %d", i);
        } else {
            fail(EXIT_BAD_LAUNCH, "unknown argument kind '%c'", kind);
        }
        L.args.push_back(a);
    }
    fclose(in);
    int fd = open(path, O_RDONLY);
    if (fd < 0) fail(EXIT_BAD_LAUNCH, "cannot read the array data %s", path);
    for (const ArrayArg& a : L.arrays)
        if (pread(fd, a.region.start, a.region.nbytes, a.offset) != (ssize_t)a.region.nbytes)
            fail(EXIT_BAD_LAUNCH, "short read of argument %d from %s", a.arg, path);
    close(fd);
    *args = L.args.data();
    *nargs = n;
    return 0;
}

// The cluster shape, "X,Y,Z" in GEMMLAB_CPU_CLUSTER (gemmlab/runtime/cpu.py reads the kernel's __cluster_dims__):
// checked against the grid; returns the blocks per cluster.
long long set_cluster() {
    LaunchDesc& L = g_launch;
    L.cluster = dim3(1, 1, 1);
    if (const char* c = getenv("GEMMLAB_CPU_CLUSTER"))
        if (sscanf(c, "%u,%u,%u", &L.cluster.x, &L.cluster.y, &L.cluster.z) != 3 || !L.cluster.x || !L.cluster.y ||
            !L.cluster.z || L.cluster.x * L.cluster.y * L.cluster.z > (unsigned)kMaxCluster)
            fail(EXIT_BAD_LAUNCH, "GEMMLAB_CPU_CLUSTER=%s is not a cluster shape X,Y,Z of at most %d blocks", c, kMaxCluster);
    if (L.grid.x % L.cluster.x || L.grid.y % L.cluster.y || L.grid.z % L.cluster.z)
        fail(EXIT_BAD_LAUNCH, "grid (%u,%u,%u) is not a whole number of clusters of (%u,%u,%u) blocks", L.grid.x,
             L.grid.y, L.grid.z, L.cluster.x, L.cluster.y, L.cluster.z);
    return (long long)L.cluster.x * L.cluster.y * L.cluster.z;
}

void run_grid(void (*entry)(const void*), const void* ctx) {
    g_entry = entry;
    g_ctx = ctx;
    install_fault_handlers();
    const LaunchDesc& L = g_launch;
    long long nblocks = (long long)L.grid.x * L.grid.y * L.grid.z;
    nblocks /= set_cluster();  // with clusters, a worker runs one cluster at a time
    if (analysis) {
        nblocks = analysis->max_blocks(nblocks);
        std::vector<AnalysisArray> arrays;
        for (const ArrayArg& a : L.arrays) arrays.push_back(AnalysisArray{a.region.start, a.region.nbytes, a.arg});
        analysis->launch(arrays.data(), (int)arrays.size());
    }
    int nthreads = (int)std::min<long long>(std::min(L.workers, kMaxWorkers), nblocks);
    std::atomic<long long> next{0};
    std::vector<std::thread> pool;
    for (int i = 1; i < nthreads; ++i) pool.emplace_back(worker_main, i, &next, nblocks);
    worker_main(0, &next, nblocks);
    for (std::thread& t : pool) t.join();
}

int launch_end() {
    const LaunchDesc& L = g_launch;
    fflush(stdout);
    if (analysis) analysis->finish();
    for (const ArrayArg& a : L.arrays)
        if (std::ptrdiff_t off = slack_written(a.region))
            fail(EXIT_MEMORY, "out-of-bounds write at byte offset %td of argument %d (an array of %zu bytes), found "
                 "after the launch", off, a.arg, a.region.nbytes);
    int fd = open(L.data_path.c_str(), O_WRONLY);
    if (fd < 0) fail(EXIT_BAD_LAUNCH, "cannot write the array data %s", L.data_path.c_str());
    for (const ArrayArg& a : L.arrays)
        if (pwrite(fd, a.region.start, a.region.nbytes, a.offset) != (ssize_t)a.region.nbytes)
            fail(EXIT_BAD_LAUNCH, "short write of argument %d to %s", a.arg, L.data_path.c_str());
    close(fd);
    return 0;
}

}  // namespace detail
}  // namespace emu
