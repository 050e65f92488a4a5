/* npu-sim-app: workloads for the NPU simulator, written against the CANN C API like a real
 * application (linked with -lascendcl -lruntime -lhccl -lms_tools_ext, or, with --dlopen,
 * loading those libraries with dlopen/dlsym as torch_npu does).
 *
 *   npu-sim-app [--dlopen] SCENARIO [options]
 *   scenarios: train | burst | alloc | collectives | faults | graph | eager
 *   options:   --steps N --step-sleep-ms MS --bytes N --threads K --launches N --iters N
 *              --count N --device D --start-delay-ms MS --wait-file PATH
 *              eager (c/eager.c): --ops N --seconds S --shapes N --distinct N --sync-every N
 *              --queue-depth N --aclop-every N --kernel-scale X --no-cache --task-queue 1|2
 *
 * Ranks come from RANK / WORLD_SIZE / LOCAL_RANK (npu-sim-run sets them); rank 0 publishes the
 * HcclRootInfo in $NPU_SIM_RDZV_DIR. Every result is checked; any failure exits non-zero.
 * Built with -DNPU_SIM_DLOPEN_ONLY (npu-sim-app-dlopen) it links none of the libraries and
 * always loads them at run time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cann.h"

/* ------------------------------------------------------------------ API table */

struct api {
#define FIELD(lib, ret, name, params) ret(*name) params;
    NPU_SIM_API(FIELD)
#undef FIELD
};
static struct api A;

static const char *const LIB_SONAME[] = {"libascendcl.so", "libruntime.so", "libhccl.so", "libms_tools_ext.so"};
enum { ACL, RT, HCCL, MSTX };

static void load_api(int use_dlopen) {
#ifndef NPU_SIM_DLOPEN_ONLY
    if (!use_dlopen) {
#define DIRECT(lib, ret, name, params) A.name = name;
        NPU_SIM_API(DIRECT)
#undef DIRECT
        return;
    }
#else
    (void)use_dlopen;
#endif
    void *h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = dlopen(LIB_SONAME[i], RTLD_NOW | RTLD_GLOBAL);
        if (!h[i]) {
            fprintf(stderr, "npu-sim-app: dlopen %s: %s\n", LIB_SONAME[i], dlerror());
            exit(2);
        }
    }
#define RESOLVE(lib, ret, name, params)                                         \
    *(void **)(&A.name) = dlsym(h[lib], #name);                                 \
    if (!A.name) {                                                              \
        fprintf(stderr, "npu-sim-app: %s lacks %s\n", LIB_SONAME[lib], #name); \
        exit(2);                                                                \
    }
    NPU_SIM_API(RESOLVE)
#undef RESOLVE
}

/* ------------------------------------------------------------------ options and checks */

static struct {
    int steps, step_sleep_ms, threads, launches, iters, device, start_delay_ms;
    size_t bytes, count;
    const char *wait_file;
} opt = {10, 0, 0, 2000, 100, -1, 0, 256 * 1024, 4096, NULL};

static int rank, world;
static volatile sig_atomic_t stop_requested;
static int failures;

/* The first SIGINT/SIGTERM ends the workload at the next step; a second one exits at once
 * (a rank may be blocked waiting for a peer that is gone). */
static void on_signal(int sig) {
    if (stop_requested) _exit(128 + sig);
    stop_requested = 1;
}

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "npu-sim-app[rank %d]: FAIL: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

/* Checks a call's status against the expected one. */
#define EXPECT(call, want)                                                          \
    do {                                                                            \
        long _rc = (long)(call);                                                    \
        if (_rc != (long)(want)) fail("%s:%d: %s = %ld, expected %ld", __FILE__, __LINE__, #call, _rc, (long)(want)); \
    } while (0)
#define CHECK(call) EXPECT(call, 0)

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !stop_requested) {
    }
}

/* ------------------------------------------------------------------ kernels
 * Host stub functions, registered with rtFunctionRegister as real CANN applications do: each
 * stub's ELF symbol is the kernel name, so a tool can name a launch from the stub address. */
static volatile int stub_sink;
__attribute__((noinline, used)) void softmax_fwd(void) { stub_sink = 1; }
__attribute__((noinline, used)) void layernorm_fwd(void) { stub_sink = 2; }
__attribute__((noinline, used)) void adam_update(void) { stub_sink = 3; }
__attribute__((noinline, used)) void faulty_kernel(void) { stub_sink = 4; }

/* Device binaries: opaque to the simulator, like real .o kernels are to the runtime. */
static const unsigned char aicore_bin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 'a', 'i', 'c'};
static const unsigned char aiv_bin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 'a', 'i', 'v'};
static const unsigned char stub_bin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 's', 't', 'b'};

struct kernels {
    aclrtFuncHandle matmul, gelu, noop, vadd;
    void *stub_bin, *all_bin;
};

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* A minimal ELF64 device binary whose symbol table lists kernels (global functions), as the
 * runtime reads it for rtRegisterAllKernel. Returns its size (0 if `cap` is too small).
 * Sections: 0 null, 1 .text, 2 .strtab, 3 .shstrtab, 4 .symtab. */
static size_t build_kernel_elf(unsigned char *buf, size_t cap, const char *const *names, int n) {
    static const char shstr[] = "\0.text\0.strtab\0.shstrtab\0.symtab";
    size_t text = 64, text_len = 16, strtab = text + text_len, strtab_len = 1;
    for (int i = 0; i < n; i++) strtab_len += strlen(names[i]) + 1;
    size_t shstrtab = strtab + strtab_len, symtab = (shstrtab + sizeof shstr + 7) & ~(size_t)7;
    size_t symtab_len = 24 * (size_t)(n + 1), shoff = (symtab + symtab_len + 7) & ~(size_t)7;
    size_t total = shoff + 5 * 64;
    if (total > cap) return 0;
    memset(buf, 0, total);
    memcpy(buf, "\x7f" "ELF\x02\x01\x01", 7);
    put16(buf + 16, 1);           /* e_type: ET_REL */
    put32(buf + 20, 1);           /* e_version */
    put64(buf + 40, shoff);       /* e_shoff */
    put16(buf + 52, 64);          /* e_ehsize */
    put16(buf + 58, 64);          /* e_shentsize */
    put16(buf + 60, 5);           /* e_shnum */
    put16(buf + 62, 3);           /* e_shstrndx */
    size_t name_off = 1;
    for (int i = 0; i < n; i++) {
        unsigned char *sym = buf + symtab + 24 * (size_t)(i + 1);
        memcpy(buf + strtab + name_off, names[i], strlen(names[i]) + 1);
        put32(sym, (uint32_t)name_off);
        sym[4] = (1 << 4) | 2;    /* STB_GLOBAL, STT_FUNC */
        put16(sym + 6, 1);        /* .text */
        put64(sym + 8, (uint64_t)i * 4);
        put64(sym + 16, 4);
        name_off += strlen(names[i]) + 1;
    }
    memcpy(buf + shstrtab, shstr, sizeof shstr);
    /* name offset in shstr, type, offset, size, link, info, entsize */
    const uint32_t sec[5][7] = {{0},
                                {1, 1, (uint32_t)text, (uint32_t)text_len, 0, 0, 0},
                                {7, 3, (uint32_t)strtab, (uint32_t)strtab_len, 0, 0, 0},
                                {15, 3, (uint32_t)shstrtab, sizeof shstr, 0, 0, 0},
                                {25, 2, (uint32_t)symtab, (uint32_t)symtab_len, 2, 1, 24}};
    for (int i = 1; i < 5; i++) {
        unsigned char *sh = buf + shoff + 64 * (size_t)i;
        put32(sh, sec[i][0]);
        put32(sh + 4, sec[i][1]);
        put64(sh + 24, sec[i][2]);
        put64(sh + 32, sec[i][3]);
        put32(sh + 40, sec[i][4]);
        put32(sh + 44, sec[i][5]);
        put64(sh + 56, sec[i][6]);
    }
    return total;
}

/* The kernels of the all-kernel binary; the trailing digits are their tiling keys. */
static const char *const ALL_KERNELS[] = {"MatMulV2_1001", "MatMulV2_1002", "AddCustom"};

static void load_kernels(struct kernels *k) {
    aclrtBinHandle aic, aiv;
    CHECK(A.aclrtBinaryLoadFromData(aicore_bin, sizeof aicore_bin, NULL, &aic));
    CHECK(A.aclrtBinaryGetFunction(aic, "matmul_fwd", &k->matmul));
    CHECK(A.aclrtBinaryGetFunction(aic, "gelu_fwd", &k->gelu));
    CHECK(A.aclrtBinaryGetFunction(aic, "noop", &k->noop));
    aclrtBinaryLoadOption o = {ACL_RT_BINARY_LOAD_OPT_MAGIC, {RT_DEV_BINARY_MAGIC_ELF_AIVEC}};
    aclrtBinaryLoadOptions opts = {&o, 1};
    CHECK(A.aclrtBinaryLoadFromData(aiv_bin, sizeof aiv_bin, &opts, &aiv));
    CHECK(A.aclrtBinaryGetFunction(aiv, "vadd_aiv", &k->vadd));
    rtDevBinary_t bin = {RT_DEV_BINARY_MAGIC_ELF, 0, stub_bin, sizeof stub_bin};
    CHECK(A.rtDevBinaryRegister(&bin, &k->stub_bin));
    /* Tiling keys of stub_bin follow registration order: 0 softmax, 1 layernorm, 2 adam, 3 faulty.
     * The kernel is named by the 4th argument (kernelInfoExt, the device function name), not by
     * stubName, which real applications set to the host stub's name. */
    CHECK(A.rtFunctionRegister(k->stub_bin, (const void *)softmax_fwd, "softmax_fwd_host_stub", "softmax_fwd", 0));
    CHECK(A.rtFunctionRegister(k->stub_bin, (const void *)layernorm_fwd, "layernorm_fwd_host_stub", "layernorm_fwd", 0));
    CHECK(A.rtFunctionRegister(k->stub_bin, (const void *)adam_update, "adam_update_host_stub", "adam_update", 0));
    CHECK(A.rtFunctionRegister(k->stub_bin, (const void *)faulty_kernel, "faulty_kernel_host_stub", "faulty_kernel", 0));
    static unsigned char all_elf[2048];
    size_t all_len = build_kernel_elf(all_elf, sizeof all_elf, ALL_KERNELS, 3);
    rtDevBinary_t all = {RT_DEV_BINARY_MAGIC_ELF, 0, all_elf, all_len};
    CHECK(A.rtRegisterAllKernel(&all, &k->all_bin));
}

/* ------------------------------------------------------------------ HCCL setup */

static void publish_root_info(HcclRootInfo *ri) {
    const char *dir = getenv("NPU_SIM_RDZV_DIR");
    char path[4096], tmp[4200];
    if (world == 1) {
        CHECK(A.HcclGetRootInfo(ri));
        return;
    }
    if (!dir) {
        fprintf(stderr, "npu-sim-app: WORLD_SIZE=%d needs NPU_SIM_RDZV_DIR (use npu-sim-run)\n", world);
        exit(2);
    }
    snprintf(path, sizeof path, "%s/hccl_root_info", dir);
    if (rank == 0) {
        CHECK(A.HcclGetRootInfo(ri));
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(ri, sizeof *ri, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
            perror("npu-sim-app: publishing root info");
            exit(2);
        }
        return;
    }
    for (int waited = 0;; waited++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(ri, sizeof *ri, 1, f);
            fclose(f);
            if (n == 1) return;
        }
        if (waited > 60000 || stop_requested) {
            fprintf(stderr, "npu-sim-app: no root info from rank 0 in %s\n", path);
            exit(2);
        }
        sleep_ms(1);
    }
}

static HcclComm init_comm(void) {
    HcclRootInfo ri;
    HcclComm comm = NULL;
    publish_root_info(&ri);
    CHECK(A.HcclCommInitRootInfo((uint32_t)world, &ri, (uint32_t)rank, &comm));
    uint32_t r = 99, n = 0;
    CHECK(A.HcclGetRankId(comm, &r));
    CHECK(A.HcclGetRankSize(comm, &n));
    if (r != (uint32_t)rank || n != (uint32_t)world) fail("comm says rank %u of %u", r, n);
    return comm;
}

/* ------------------------------------------------------------------ scenarios */

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    CHECK(A.aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    return p;
}

static void *host_alloc(size_t bytes) {
    void *p = NULL;
    CHECK(A.aclrtMallocHost(&p, bytes));
    return p;
}

/* Per step: H2D copy, kernels on two streams (handle and stub launch paths, AI Core, AI Vector
 * and AI CPU), an event between the streams, an allreduce of rank-dependent values, a D2H copy
 * and an mstx range. */
static int scenario_train(void) {
    struct kernels k;
    aclrtStream s0, s1;
    aclrtEvent ev;
    load_kernels(&k);
    CHECK(A.aclrtCreateStream(&s0));
    CHECK(A.aclrtCreateStream(&s1));
    CHECK(A.aclrtCreateEvent(&ev));
    HcclComm comm = init_comm();

    size_t in_bytes = opt.bytes, grads = opt.count;
    void *d_in = dev_alloc(in_bytes), *d_w = dev_alloc(in_bytes), *d_grad = dev_alloc(grads * sizeof(float));
    unsigned char *h_in = host_alloc(in_bytes);
    float *h_grad = host_alloc(grads * sizeof(float)), *h_out = host_alloc(grads * sizeof(float));
    memset(h_in, 0x5a, in_bytes);
    CHECK(A.aclrtMemset(d_w, in_bytes, 0, in_bytes));
    CHECK(A.aclrtMemcpy(d_w, in_bytes, h_in, in_bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    mstxDomainHandle_t dom = A.mstxDomainCreateA("npu-sim-train");
    A.mstxMarkA("train begin", s0);
    A.mstxDomainMarkA(dom, "model loaded", s0);
    uint64_t args[4] = {(uint64_t)(uintptr_t)d_in, (uint64_t)(uintptr_t)d_w, in_bytes, 0};
    rtArgsEx_t args_ex = {args, NULL, sizeof args, 0, 0, 0, 0, 0, {0}};

    int step;
    for (step = 0; step < opt.steps && !stop_requested; step++) {
        char name[64];
        snprintf(name, sizeof name, "step %d", step);
        mstxRangeId range = A.mstxRangeStartA(name, s0);
        mstxRangeId drange = A.mstxDomainRangeStartA(dom, "forward", s0);
        CHECK(A.aclrtMemcpyAsync(d_in, in_bytes, h_in, in_bytes, ACL_MEMCPY_HOST_TO_DEVICE, s0));
        CHECK(A.aclrtLaunchKernel(k.matmul, 24, args, sizeof args, s0));
        CHECK(A.aclrtLaunchKernel(k.gelu, 8, args, sizeof args, s0));
        CHECK(A.aclrtRecordEvent(ev, s0));
        CHECK(A.aclrtStreamWaitEvent(s1, ev));
        CHECK(A.rtKernelLaunch((const void *)softmax_fwd, 16, args, sizeof args, NULL, s1));
        CHECK(A.rtKernelLaunch((const void *)layernorm_fwd, 8, args, sizeof args, NULL, s1));
        CHECK(A.aclrtLaunchKernel(k.vadd, 4, args, sizeof args, s1));
        CHECK(A.rtCpuKernelLaunch("libcpu_kernels.so", "TopKV2", 1, args, sizeof args, NULL, s1));
        CHECK(A.rtKernelLaunchWithHandleV2(k.stub_bin, 2, 32, &args_ex, NULL, s1, NULL)); /* adam_update */
        CHECK(A.rtKernelLaunchWithHandleV2(k.all_bin, 1002, 24, &args_ex, NULL, s1, NULL)); /* MatMulV2_1002 */
        uint32_t task = 0, stream = 0;
        CHECK(A.rtGetTaskIdAndStreamID(&task, &stream));
        A.mstxDomainRangeEnd(dom, drange);
        CHECK(A.aclrtSynchronizeEvent(ev));
        CHECK(A.aclrtSynchronizeStream(s1));

        for (size_t i = 0; i < grads; i++) h_grad[i] = (float)(rank + step);
        CHECK(A.aclrtMemcpyAsync(d_grad, grads * sizeof(float), h_grad, grads * sizeof(float),
                                 ACL_MEMCPY_HOST_TO_DEVICE, s0));
        CHECK(A.HcclAllReduce(d_grad, d_grad, grads, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s0));
        CHECK(A.aclrtMemcpyAsync(h_out, grads * sizeof(float), d_grad, grads * sizeof(float),
                                 ACL_MEMCPY_DEVICE_TO_HOST, s0));
        CHECK(A.aclrtSynchronizeStream(s0));
        float want = (float)(world * (world - 1) / 2 + world * step);
        for (size_t i = 0; i < grads; i++) {
            if (h_out[i] != want) {
                fail("step %d: allreduce[%zu] = %g, expected %g", step, i, h_out[i], want);
                break;
            }
        }
        A.mstxRangeEnd(range);
        if (opt.step_sleep_ms) sleep_ms(opt.step_sleep_ms);
    }
    CHECK(A.aclrtMemsetAsync(d_grad, grads * sizeof(float), 0, grads * sizeof(float), s0));
    /* The synchronous copy runs on the default stream: wait for s0's memset first. */
    CHECK(A.aclrtSynchronizeStream(s0));
    CHECK(A.aclrtMemcpy(h_out, grads * sizeof(float), d_grad, grads * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    if (grads && h_out[0] != 0.0f) fail("memset then D2H copy read %g", h_out[0]);
    CHECK(A.aclrtSynchronizeDevice());
    A.mstxDomainDestroy(dom);
    CHECK(A.HcclCommDestroy(comm));
    CHECK(A.aclrtDestroyEvent(ev));
    CHECK(A.aclrtDestroyStream(s1));
    CHECK(A.aclrtDestroyStream(s0));
    CHECK(A.aclrtFree(d_in));
    CHECK(A.aclrtFree(d_w));
    CHECK(A.aclrtFree(d_grad));
    CHECK(A.aclrtFreeHost(h_in));
    CHECK(A.aclrtFreeHost(h_grad));
    CHECK(A.aclrtFreeHost(h_out));
    printf("npu-sim-app: train done: rank %d, %d steps\n", rank, step);
    return 0;
}

struct burst_arg {
    struct kernels *k;
    int device;
    long launched;
};

static void *burst_thread(void *p) {
    struct burst_arg *b = p;
    aclrtStream s;
    CHECK(A.aclrtSetDevice(b->device));
    CHECK(A.aclrtCreateStream(&s));
    for (int i = 0; i < opt.launches && !stop_requested; i++) {
        CHECK(A.aclrtLaunchKernel(b->k->noop, 1, NULL, 0, s));
        b->launched++;
        if (i % 256 == 255) CHECK(A.aclrtSynchronizeStream(s));
    }
    CHECK(A.aclrtSynchronizeStream(s));
    CHECK(A.aclrtDestroyStream(s));
    CHECK(A.aclrtResetDevice(b->device));
    return NULL;
}

/* Launches as fast as possible from K threads, each on its own stream. */
static int scenario_burst(void) {
    struct kernels k;
    load_kernels(&k);
    int n = opt.threads > 0 ? opt.threads : 4;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    struct burst_arg *b = calloc((size_t)n, sizeof *b);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        b[i] = (struct burst_arg){&k, opt.device, 0};
        pthread_create(&t[i], NULL, burst_thread, &b[i]);
    }
    long total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        total += b[i].launched;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("npu-sim-app: burst done: %ld launches from %d threads in %.3f s (%.0f/s)\n", total, n, s, (double)total / s);
    free(t);
    free(b);
    return 0;
}

/* Allocation patterns: mixed sizes and policies, interleaved frees, pinned host memory,
 * direct rtMalloc, and a memset + copy round trip to check the memory is usable. */
static int scenario_alloc(void) {
    static const size_t sizes[] = {7, 1024, 65536, 1 << 20, 3 << 20, 333};
    enum { LIVE = 8 };
    void *live[LIVE] = {0};
    int32_t count = 0;
    CHECK(A.rtGetDeviceCount(&count));
    if (count < 1) fail("rtGetDeviceCount = %d", count);
    unsigned char *h = host_alloc(4096);
    for (int i = 0; i < opt.iters && !stop_requested; i++) {
        int slot = (i * 5) % LIVE;
        if (live[slot]) CHECK(A.aclrtFree(live[slot]));
        size_t sz = sizes[i % 6];
        CHECK(A.aclrtMalloc(&live[slot], sz, i % 3));
        CHECK(A.aclrtMemset(live[slot], sz, i & 0xff, sz < 4096 ? sz : 4096));
        if (i % 10 == 0) {
            size_t n = sz < 4096 ? sz : 4096;
            CHECK(A.aclrtMemcpy(h, 4096, live[slot], n, ACL_MEMCPY_DEVICE_TO_HOST));
            for (size_t j = 0; j < n; j++)
                if (h[j] != (unsigned char)(i & 0xff)) {
                    fail("alloc %d: byte %zu = %u", i, j, h[j]);
                    break;
                }
            void *raw = NULL, *ph = NULL;
            CHECK(A.rtMalloc(&raw, 2048, RT_MEMORY_HBM, 7));
            CHECK(A.rtFree(raw));
            CHECK(A.aclrtMallocHost(&ph, sz));
            CHECK(A.aclrtFreeHost(ph));
        }
    }
    for (int i = 0; i < LIVE; i++)
        if (live[i]) CHECK(A.aclrtFree(live[i]));
    CHECK(A.aclrtFreeHost(h));
    printf("npu-sim-app: alloc done: %d iterations\n", opt.iters);
    return 0;
}

static int32_t *dev_ints(size_t n) { return dev_alloc(n * sizeof(int32_t)); }

static void put_ints(int32_t *dev, const int32_t *host, size_t n) {
    CHECK(A.aclrtMemcpy(dev, n * sizeof *host, host, n * sizeof *host, ACL_MEMCPY_HOST_TO_DEVICE));
}

static void get_ints(int32_t *host, const int32_t *dev, size_t n) {
    CHECK(A.aclrtMemcpy(host, n * sizeof *host, dev, n * sizeof *host, ACL_MEMCPY_DEVICE_TO_HOST));
}

static void expect_ints(const char *what, const int32_t *got, size_t n, int32_t (*want)(size_t)) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want(i)) {
            fail("%s[%zu] = %d, expected %d", what, i, got[i], want(i));
            return;
        }
}

static size_t C; /* elements per rank in the collectives scenario */
static int32_t w_allreduce(size_t i) { (void)i; return world * (world - 1) / 2; }
static int32_t w_bcast(size_t i) { return (int32_t)(1000 * (world - 1) + (int)(i % 1000)); }
static int32_t w_gather(size_t i) { return (int32_t)(1000 * (int)(i / C) + (int)(i % C % 1000)); }
static int32_t w_rscatter(size_t i) { (void)i; return world * (world - 1) / 2 + world * rank; }
static int32_t w_reduce(size_t i) { (void)i; return world * (world + 1) / 2; }
static int32_t w_a2a(size_t i) { return (int32_t)(100 * (int)(i / C) + rank); }
static int32_t w_recv(size_t i) { return (int32_t)(7 * ((rank + world - 1) % world) + (int)(i % 5)); }
static int32_t w_max(size_t i) { (void)i; return world - 1; }

/* Every HCCL operation, each result checked. */
static int scenario_collectives(void) {
    aclrtStream s0, s1;
    CHECK(A.aclrtCreateStream(&s0));
    CHECK(A.aclrtCreateStream(&s1));
    HcclComm comm = init_comm();
    C = opt.count;
    size_t nw = C * (size_t)world;
    int32_t *h = malloc(nw * sizeof *h), *d_a = dev_ints(nw), *d_b = dev_ints(nw);

    for (size_t i = 0; i < C; i++) h[i] = rank;
    put_ints(d_a, h, C);
    CHECK(A.HcclAllReduce(d_a, d_b, C, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));
    get_ints(h, d_b, C);
    expect_ints("allreduce(sum)", h, C, w_allreduce);

    for (size_t i = 0; i < C; i++) h[i] = rank;
    put_ints(d_a, h, C);
    CHECK(A.HcclAllReduce(d_a, d_a, C, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));
    get_ints(h, d_a, C);
    expect_ints("allreduce(max, in place)", h, C, w_max);

    for (size_t i = 0; i < C; i++) h[i] = rank == world - 1 ? (int32_t)(1000 * rank + (int)(i % 1000)) : -1;
    put_ints(d_a, h, C);
    CHECK(A.HcclBroadcast(d_a, C, HCCL_DATA_TYPE_INT32, (uint32_t)(world - 1), comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));
    get_ints(h, d_a, C);
    expect_ints("broadcast", h, C, w_bcast);

    for (size_t i = 0; i < C; i++) h[i] = (int32_t)(1000 * rank + (int)(i % 1000));
    put_ints(d_a, h, C);
    CHECK(A.HcclAllGather(d_a, d_b, C, HCCL_DATA_TYPE_INT32, comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));
    get_ints(h, d_b, nw);
    expect_ints("allgather", h, nw, w_gather);

    for (size_t i = 0; i < nw; i++) h[i] = (int32_t)(rank + (int)(i / C));
    put_ints(d_a, h, nw);
    CHECK(A.HcclReduceScatter(d_a, d_b, C, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));
    get_ints(h, d_b, C);
    expect_ints("reducescatter", h, C, w_rscatter);

    for (size_t i = 0; i < C; i++) h[i] = rank + 1;
    put_ints(d_a, h, C);
    CHECK(A.aclrtMemset(d_b, C * sizeof *h, 0, C * sizeof *h));
    CHECK(A.HcclReduce(d_a, d_b, C, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 0, comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));
    if (rank == 0) {
        get_ints(h, d_b, C);
        expect_ints("reduce", h, C, w_reduce);
    }

    for (size_t i = 0; i < nw; i++) h[i] = (int32_t)(100 * rank + (int)(i / C));
    put_ints(d_a, h, nw);
    CHECK(A.HcclAlltoAll(d_a, C, HCCL_DATA_TYPE_INT32, d_b, C, HCCL_DATA_TYPE_INT32, comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));
    get_ints(h, d_b, nw);
    expect_ints("alltoall", h, nw, w_a2a);

    if (world > 1) {
        /* A ring: send to the next rank on one stream while receiving from the previous one on
         * another, so large messages cannot deadlock. */
        for (size_t i = 0; i < C; i++) h[i] = (int32_t)(7 * rank + (int)(i % 5));
        put_ints(d_a, h, C);
        CHECK(A.HcclSend(d_a, C, HCCL_DATA_TYPE_INT32, (uint32_t)((rank + 1) % world), comm, s1));
        CHECK(A.HcclRecv(d_b, C, HCCL_DATA_TYPE_INT32, (uint32_t)((rank + world - 1) % world), comm, s0));
        CHECK(A.aclrtSynchronizeStream(s0));
        CHECK(A.aclrtSynchronizeStream(s1));
        get_ints(h, d_b, C);
        expect_ints("send/recv ring", h, C, w_recv);
    }
    CHECK(A.HcclBarrier(comm, s0));
    CHECK(A.aclrtSynchronizeStream(s0));

    CHECK(A.HcclCommDestroy(comm));
    CHECK(A.aclrtFree(d_a));
    CHECK(A.aclrtFree(d_b));
    CHECK(A.aclrtDestroyStream(s0));
    CHECK(A.aclrtDestroyStream(s1));
    free(h);
    printf("npu-sim-app: collectives done: rank %d of %d, %zu elements\n", rank, world, C);
    return 0;
}

/* A model blob of the simulator's format (docs/simulator.md "Graph execution"): 64-byte entries
 * of op (1 kernel, 2 memcpy), blockDim or copy kind, src, dst, bytes, kernel name. */
struct graph_entry {
    uint32_t op, arg;
    uint64_t src, dst, bytes;
    char name[32];
};

static size_t build_graph(unsigned char *buf, const struct graph_entry *e, uint32_t n) {
    memcpy(buf, "NPUSIMG1", 8);
    uint32_t version = 1;
    memcpy(buf + 8, &version, 4);
    memcpy(buf + 12, &n, 4);
    memcpy(buf + 16, e, sizeof *e * n);
    return 16 + sizeof *e * n;
}

/* Graph execution: a model of copies and kernels loaded once (its tasks go to the driver in
 * bulk), then run per step with aclmdlExecuteAsync and once with aclmdlExecute. Each run copies
 * a host buffer through two device buffers back to the host, which is checked. */
static int scenario_graph(void) {
    aclrtStream s;
    CHECK(A.aclrtCreateStream(&s));
    size_t bytes = opt.bytes;
    unsigned char *h_in = host_alloc(bytes), *h_out = host_alloc(bytes);
    void *d_a = dev_alloc(bytes), *d_b = dev_alloc(bytes);
    const struct graph_entry e[] = {
        {2, ACL_MEMCPY_HOST_TO_DEVICE, (uintptr_t)h_in, (uintptr_t)d_a, bytes, ""},
        {1, 24, 0, 0, 0, "graph_matmul"},
        {1, 8, 0, 0, 0, "graph_gelu"},
        {2, ACL_MEMCPY_DEVICE_TO_DEVICE, (uintptr_t)d_a, (uintptr_t)d_b, bytes, ""},
        {1, 4, 0, 0, 0, "graph_add"},
        {2, ACL_MEMCPY_DEVICE_TO_HOST, (uintptr_t)d_b, (uintptr_t)h_out, bytes, ""},
    };
    static unsigned char blob[16 + sizeof e];
    size_t len = build_graph(blob, e, sizeof e / sizeof e[0]);
    uint32_t model = 0;
    CHECK(A.aclmdlLoadFromMem(blob, len, &model));
    int step;
    for (step = 0; step <= opt.steps && !stop_requested; step++) {
        memset(h_in, 0x30 + step, bytes);
        memset(h_out, 0, bytes);
        if (step < opt.steps) {
            CHECK(A.aclmdlExecuteAsync(model, NULL, NULL, s));
            CHECK(A.aclrtSynchronizeStream(s));
        } else {
            CHECK(A.aclmdlExecute(model, NULL, NULL));
        }
        for (size_t i = 0; i < bytes; i++)
            if (h_out[i] != (unsigned char)(0x30 + step)) {
                fail("graph run %d: byte %zu = %u", step, i, h_out[i]);
                break;
            }
        if (opt.step_sleep_ms) sleep_ms(opt.step_sleep_ms);
    }
    CHECK(A.aclmdlUnload(model));
    CHECK(A.aclrtFree(d_a));
    CHECK(A.aclrtFree(d_b));
    CHECK(A.aclrtFreeHost(h_in));
    CHECK(A.aclrtFreeHost(h_out));
    CHECK(A.aclrtDestroyStream(s));
    printf("npu-sim-app: graph done: %d runs\n", step);
    return 0;
}

/* An API error (real error codes for bad arguments and an injected failure) and a device fault
 * (a kernel whose CQE carries ACL_ERROR_RT_AICORE_EXCEPTION). The injections are set through
 * the documented environment variables unless the caller already set them. */
static int scenario_faults(void) {
    struct kernels k;
    aclrtStream s;
    load_kernels(&k);
    CHECK(A.aclrtCreateStream(&s));
    EXPECT(A.aclrtMalloc(NULL, 100, ACL_MEM_MALLOC_HUGE_FIRST), 107000);  /* ACL_ERROR_RT_PARAM_INVALID */
    EXPECT(A.aclrtSetDevice(9999), 107001);                                /* ACL_ERROR_RT_INVALID_DEVICEID */
    EXPECT(A.aclrtMalloc(&(void *){0}, 0, ACL_MEM_MALLOC_HUGE_FIRST), 100000); /* ACL_ERROR_INVALID_PARAM */
    void *d = dev_alloc(64);
    char host[128];
    EXPECT(A.aclrtMemcpy(d, 64, host, 128, ACL_MEMCPY_HOST_TO_DEVICE), 107000); /* count > destMax */
    EXPECT(A.HcclAllReduce(d, d, 4, 99, HCCL_REDUCE_SUM, (HcclComm)0, s), 2);  /* HCCL_E_PTR: no comm */

    const char *inj = getenv("NPU_SIM_FAIL_API");
    if (inj && strcmp(inj, "aclrtCreateEvent:1:507899") == 0) {
        aclrtEvent ev = NULL;
        EXPECT(A.aclrtCreateEvent(&ev), 507899);
        CHECK(A.aclrtCreateEvent(&ev));
        CHECK(A.aclrtDestroyEvent(ev));
    }
    const char *fk = getenv("NPU_SIM_FAULT_KERNEL");
    int faulting = fk && strcmp(fk, "faulty_kernel:2") == 0;
    for (int i = 1; i <= 3; i++) {
        CHECK(A.rtKernelLaunch((const void *)faulty_kernel, 4, NULL, 0, NULL, s));
        EXPECT(A.aclrtSynchronizeStream(s), faulting && i == 2 ? 507015 : 0); /* ACL_ERROR_RT_AICORE_EXCEPTION */
    }
    CHECK(A.aclrtFree(d));
    CHECK(A.aclrtDestroyStream(s));
    printf("npu-sim-app: faults done\n");
    return 0;
}

#include "eager.c"

/* ------------------------------------------------------------------ main */

static void usage(void) {
    fprintf(stderr,
            "usage: npu-sim-app [--dlopen] train|burst|alloc|collectives|faults|graph|eager [--steps N]\n"
            "       [--step-sleep-ms MS] [--bytes N] [--threads K] [--launches N] [--iters N] [--count N]\n"
            "       [--device D] [--start-delay-ms MS] [--wait-file PATH]\n"
            "       eager: [--ops N] [--seconds S] [--shapes N] [--distinct N] [--sync-every N] [--queue-depth N]\n"
            "              [--aclop-every N] [--kernel-scale X] [--no-cache] [--task-queue 1|2]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *scenario = NULL;
    int use_dlopen = 0, n;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NUM(flag, field) else if (!strcmp(a, flag) && v) { opt.field = atol(v); i++; }
        if (!strcmp(a, "--dlopen")) use_dlopen = 1;
        NUM("--steps", steps) NUM("--step-sleep-ms", step_sleep_ms) NUM("--threads", threads)
        NUM("--launches", launches) NUM("--iters", iters) NUM("--device", device)
        NUM("--start-delay-ms", start_delay_ms) NUM("--bytes", bytes) NUM("--count", count)
        else if (!strcmp(a, "--wait-file") && v) { opt.wait_file = v; i++; }
        else if ((n = eager_option(a, v)) >= 0) i += n;
        else if (a[0] != '-' && !scenario) scenario = a;
        else usage();
#undef NUM
    }
    if (!scenario) usage();
    rank = env_int("RANK", 0);
    world = env_int("WORLD_SIZE", 1);
    if (opt.device < 0) opt.device = env_int("LOCAL_RANK", 0);
    if (!strcmp(scenario, "faults")) {
        setenv("NPU_SIM_FAIL_API", "aclrtCreateEvent:1:507899", 0);
        setenv("NPU_SIM_FAULT_KERNEL", "faulty_kernel:2", 0);
    }
    if (!strcmp(scenario, "eager")) eager_env();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    printf("npu-sim-app: pid=%d rank=%d world=%d device=%d scenario=%s\n", (int)getpid(), rank, world, opt.device,
           scenario);
    fflush(stdout);
    if (opt.start_delay_ms) sleep_ms(opt.start_delay_ms);
    if (opt.wait_file) {
        struct stat st;
        while (stat(opt.wait_file, &st) != 0 && !stop_requested) sleep_ms(10);
    }

    load_api(use_dlopen);
    CHECK(A.aclInit(NULL));
    CHECK(A.aclrtSetDevice(opt.device));
    int32_t dev = -1;
    CHECK(A.aclrtGetDevice(&dev));
    if (dev != opt.device) fail("aclrtGetDevice = %d", dev);

    if (!strcmp(scenario, "train")) scenario_train();
    else if (!strcmp(scenario, "burst")) scenario_burst();
    else if (!strcmp(scenario, "alloc")) scenario_alloc();
    else if (!strcmp(scenario, "collectives")) scenario_collectives();
    else if (!strcmp(scenario, "faults")) scenario_faults();
    else if (!strcmp(scenario, "graph")) scenario_graph();
    else if (!strcmp(scenario, "eager")) scenario_eager();
    else usage();

    CHECK(A.aclrtResetDevice(opt.device));
    CHECK(A.aclFinalize());
    if (failures) {
        fprintf(stderr, "npu-sim-app[rank %d]: %d check(s) failed\n", rank, failures);
        return 1;
    }
    return 0;
}
