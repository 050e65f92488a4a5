/* bench-calls: CANN API calls of the NPU simulator in a tight loop, for `cargo xtask bench`.
 *
 *   bench-calls --seconds S --out FILE PHASE[:THREADS] ...
 *   phases: launch (aclrtLaunchKernel), memcpy (aclrtMemcpyAsync, 64 B H2D), mark (mstxMarkA),
 *           mix (the three in turn)
 *
 * Each phase runs for S seconds on THREADS threads (default 1), each thread on its own stream,
 * synchronizing its stream every 256 operations (the SQ holds 1024 tasks). Counted calls are
 * the application's calls (the outermost API calls, aclrtSynchronizeStream included); nested
 * calls (rt*, hal*) are not counted. One line per phase goes to FILE:
 *
 *   phase=launch threads=1 calls=123456 seconds=2.000123
 *
 * then `uprobes_mapped=0|1` (whether any uprobe fired in this process) and `cpu_seconds=`
 * (this process's own CPU time, which lets the bench tell a tracer's CPU from its child's).
 *
 * Linked against the simulator's libraries like npu-sim-app (built by xtask with gcc). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "npu_sim_cann.h"

#define MAX_THREADS 64
#define BATCH 64
#define SYNC_EVERY 256

enum kind { LAUNCH, MEMCPY, MARK, MIX };

static aclrtFuncHandle noop;
static volatile int stop;
static int failures;
static pthread_barrier_t start_line;

struct worker {
    pthread_t thread;
    enum kind kind;
    aclrtStream stream;
    void *dev, *host;
    long calls;
    double seconds;
};

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "bench-calls: %s = %d\n", what, rc);
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One API call of `kind` (MIX: launch, memcpy and mark in turn). */
static inline void op(struct worker *w, enum kind kind, long i) {
    if (kind == MIX) kind = (enum kind)(i % 3);
    switch (kind) {
    case LAUNCH:
        check(aclrtLaunchKernel(noop, 1, NULL, 0, w->stream), "aclrtLaunchKernel");
        break;
    case MEMCPY:
        check(aclrtMemcpyAsync(w->dev, 64, w->host, 64, ACL_MEMCPY_HOST_TO_DEVICE, w->stream), "aclrtMemcpyAsync");
        break;
    default:
        mstxMarkA("bench", w->stream);
        break;
    }
}

static void *run(void *p) {
    struct worker *w = p;
    check(aclrtSetDevice(0), "aclrtSetDevice");
    pthread_barrier_wait(&start_line);
    double t0 = now();
    long calls = 0, i = 0;
    while (!stop) {
        for (int j = 0; j < BATCH; j++, i++) op(w, w->kind, i);
        calls += BATCH;
        if (i % SYNC_EVERY == 0) {
            check(aclrtSynchronizeStream(w->stream), "aclrtSynchronizeStream");
            calls++;
        }
    }
    check(aclrtSynchronizeStream(w->stream), "aclrtSynchronizeStream");
    w->seconds = now() - t0;
    w->calls = calls + 1;
    return NULL;
}

static int uprobes_mapped(void) {
    FILE *m = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (m && fgets(line, sizeof line, m))
        if (strstr(line, "[uprobes]")) found = 1;
    if (m) fclose(m);
    return found;
}

int main(int argc, char **argv) {
    double seconds = 1.0;
    const char *out = NULL;
    int first_phase = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else { first_phase = i; break; }
    }
    if (!out || first_phase >= argc) {
        fprintf(stderr, "usage: bench-calls --seconds S --out FILE PHASE[:THREADS] ...\n");
        return 2;
    }
    FILE *f = fopen(out, "w");
    if (!f) { perror(out); return 2; }

    static const unsigned char bin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 'b', 'e', 'n', 'c', 'h'};
    aclrtBinHandle bh;
    check(aclInit(NULL), "aclInit");
    check(aclrtSetDevice(0), "aclrtSetDevice");
    check(aclrtBinaryLoadFromData(bin, sizeof bin, NULL, &bh), "aclrtBinaryLoadFromData");
    check(aclrtBinaryGetFunction(bh, "noop", &noop), "aclrtBinaryGetFunction");
    int streams = 1;
    for (int a = first_phase; a < argc; a++) {
        const char *colon = strchr(argv[a], ':');
        int n = colon ? atoi(colon + 1) : 1;
        if (n > streams) streams = n < MAX_THREADS ? n : MAX_THREADS;
    }
    static struct worker w[MAX_THREADS];
    for (int t = 0; t < streams; t++) {
        check(aclrtCreateStream(&w[t].stream), "aclrtCreateStream");
        check(aclrtMalloc(&w[t].dev, 64, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
        check(aclrtMallocHost(&w[t].host, 64), "aclrtMallocHost");
        memset(w[t].host, 0x5a, 64);
    }
    if (failures) return 1;

    for (int a = first_phase; a < argc; a++) {
        char name[32] = {0};
        int threads = 1;
        const char *colon = strchr(argv[a], ':');
        size_t len = colon ? (size_t)(colon - argv[a]) : strlen(argv[a]);
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, argv[a], len);
        if (colon) threads = atoi(colon + 1);
        if (threads < 1 || threads > streams) threads = 1;
        enum kind kind;
        if (!strcmp(name, "launch")) kind = LAUNCH;
        else if (!strcmp(name, "memcpy")) kind = MEMCPY;
        else if (!strcmp(name, "mark")) kind = MARK;
        else if (!strcmp(name, "mix")) kind = MIX;
        else { fprintf(stderr, "bench-calls: unknown phase %s\n", name); return 2; }

        stop = 0;
        pthread_barrier_init(&start_line, NULL, (unsigned)threads + 1);
        for (int t = 0; t < threads; t++) {
            w[t].kind = kind;
            w[t].calls = 0;
            pthread_create(&w[t].thread, NULL, run, &w[t]);
        }
        pthread_barrier_wait(&start_line);
        struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        nanosleep(&ts, NULL);
        stop = 1;
        long calls = 0;
        double longest = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(w[t].thread, NULL);
            calls += w[t].calls;
            if (w[t].seconds > longest) longest = w[t].seconds;
        }
        pthread_barrier_destroy(&start_line);
        fprintf(f, "phase=%s threads=%d calls=%ld seconds=%.6f\n", name, threads, calls, longest);
        fflush(f);
    }
    for (int t = 0; t < streams; t++) {
        check(aclrtFree(w[t].dev), "aclrtFree");
        check(aclrtFreeHost(w[t].host), "aclrtFreeHost");
        check(aclrtDestroyStream(w[t].stream), "aclrtDestroyStream");
    }
    check(aclrtResetDevice(0), "aclrtResetDevice");
    check(aclFinalize(), "aclFinalize");
    /* The kernel maps "[uprobes]" (the out-of-line stepping area) into a process the first
     * time one of its uprobes fires: proof that a run meant to be untraced was not. */
    fprintf(f, "uprobes_mapped=%d\n", uprobes_mapped());
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f, "cpu_seconds=%.6f\n", (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                                         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    fclose(f);
    return failures ? 1 : 0;
}
