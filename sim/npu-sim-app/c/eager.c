/* The eager scenario: operators dispatched the way torch_npu does (Ascend/op-plugin
 * op_plugin/utils/op_api_common.h EXEC_NPU_CMD_V1, hit_cache; Ascend/pytorch
 * torch_npu/csrc/core/npu/NPUQueue.cpp). Included by app.c.
 *
 * Each producer thread (the Python thread; --threads, default 1) has its own stream and task
 * queue, drained by a consumer thread (torch_npu's ACL thread, which sets the device first). Per
 * operator the producer (with --task-queue 2, as EXEC_NPU_CMD_V2, the consumer does all of this
 * and runs the second phase at once; its cache key is a byte string: SetPTACacheHashKey and
 * PTAFindExecCache):
 *   - looks the executor up in the PTA cache: InitPTACacheThreadLocal, AddTensorAddrToCachedList
 *     per tensor, SetPTAHashKey(hash of op name, shapes, dtypes, strides, device, stream),
 *     PTAGetExecCache; on a hit it queues the second phase with that executor and is done;
 *   - otherwise InitHugeMemThreadLocal, creates the aclTensor/aclScalar/aclIntArray arguments,
 *     runs aclnnXxxGetWorkspaceSize on its own thread (which stores the executor in the cache
 *     under the hash), queues the second phase, UnInitHugeMemThreadLocal, UnInitPTACacheThreadLocal.
 * The consumer runs aclnnXxx(workspace, size, executor, stream), then destroys the arguments
 * and calls ReleaseHugeMem. Every --aclop-every operators one is an aclop instead: descriptions,
 * buffers and attributes made by the producer, aclopCompileAndExecuteV2 on the consumer (which
 * dlopens libacl_op_compiler.so at the first one, as torch_npu does). Every
 * --sync-every operators the producer waits for its queue to drain and synchronizes its stream.
 * Operator functions are found as op-plugin's GetOpApiFuncAddr does: libcust_opapi.so, then
 * libopapi.so, then every $ASCEND_HOME_PATH/lib64/libopapi_*.so. */
#include <dirent.h>

#include "cann_ops.h"

static struct {
    long ops;
    double seconds, kernel_scale;
    int shapes, sync_every, queue_depth, aclop_every, no_cache, distinct, task_queue;
} eopt = {20000, 0, 0.01, 4, 2000, 4096, 1000, 0, 0, 1};

/* Consumes an eager option: returns how many values it took (0 or 1), or -1 if `a` is not one. */
static int eager_option(const char *a, const char *v) {
    if (!strcmp(a, "--no-cache")) {
        eopt.no_cache = 1;
        return 0;
    }
    if (!v) return -1;
    if (!strcmp(a, "--ops")) eopt.ops = atol(v);
    else if (!strcmp(a, "--seconds")) eopt.seconds = atof(v);
    else if (!strcmp(a, "--kernel-scale")) eopt.kernel_scale = atof(v);
    else if (!strcmp(a, "--shapes")) eopt.shapes = atoi(v);
    else if (!strcmp(a, "--sync-every")) eopt.sync_every = atoi(v);
    else if (!strcmp(a, "--queue-depth")) eopt.queue_depth = atoi(v);
    else if (!strcmp(a, "--aclop-every")) eopt.aclop_every = atoi(v);
    else if (!strcmp(a, "--distinct")) eopt.distinct = atoi(v);
    else if (!strcmp(a, "--task-queue")) eopt.task_queue = atoi(v);
    else return -1;
    return 1;
}

/* Device time is scaled down so that the simulated device keeps up with tens of thousands of
 * small operators per second (NPU_SIM_TIME_SCALE wins if set). */
static void eager_env(void) {
    char s[32];
    snprintf(s, sizeof s, "%g", eopt.kernel_scale);
    setenv("NPU_SIM_TIME_SCALE", s, 0);
}

/* ------------------------------------------------------------------ libraries */

static struct ops_api {
#define FIELD(lib, ret, name, params) ret(*name) params;
    NPU_SIM_OPS_API(FIELD)
#undef FIELD
} O;

static void *op_libs[16];
static int n_op_libs;

static void *must_open(const char *name) {
    void *h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "npu-sim-app: dlopen %s: %s\n", name, dlerror());
        exit(2);
    }
    return h;
}

static void load_ops_api(void) {
    void *libs[2] = {must_open("libnnopbase.so"), must_open("libascendcl.so")};
#define RESOLVE(lib, ret, name, params)                                  \
    *(void **)(&O.name) = dlsym(libs[lib], #name);                       \
    if (!O.name) {                                                       \
        fprintf(stderr, "npu-sim-app: no %s in its library\n", #name); \
        exit(2);                                                         \
    }
    NPU_SIM_OPS_API(RESOLVE)
#undef RESOLVE
    /* GetOpApiFuncAddr's order: the custom package, libopapi.so, then the feature libraries. */
    void *cust = dlopen("libcust_opapi.so", RTLD_LAZY);
    if (cust) op_libs[n_op_libs++] = cust;
    op_libs[n_op_libs++] = must_open("libopapi.so");
    const char *home = getenv("ASCEND_HOME_PATH");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/lib64", home ? home : ".");
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n_op_libs < 16) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "libopapi_", 9) != 0 || n < 3 || strcmp(e->d_name + n - 3, ".so") != 0) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        void *h = dlopen(path, RTLD_LAZY);
        if (h) op_libs[n_op_libs++] = h;
    }
    if (d) closedir(d);
}

/* libacl_op_compiler.so is dlopened at the first aclop call, on the consumer thread, as
 * torch_npu's TORCH_NPU_REGISTER_LIBRARY / GET_FUNCTION do (AclOpCompileInterface.cpp). */
static aclopCompileAndExecuteV2Fn aclop_fn;
static pthread_once_t aclop_once = PTHREAD_ONCE_INIT;

static void load_aclop(void) {
    *(void **)(&aclop_fn) = dlsym(must_open("libacl_op_compiler.so"), "aclopCompileAndExecuteV2");
    if (!aclop_fn) {
        fprintf(stderr, "npu-sim-app: no aclopCompileAndExecuteV2 in libacl_op_compiler.so\n");
        exit(2);
    }
}

static void *get_op_api(const char *name) {
    for (int i = 0; i < n_op_libs; i++) {
        void *p = dlsym(op_libs[i], name);
        if (p) return p;
    }
    return NULL;
}

/* ------------------------------------------------------------------ operators */

enum shape {
    SH_UNARY, SH_BINARY, SH_BINARY_ALPHA, SH_TENSOR_SCALAR, SH_INPLACE, SH_INPLACE_SCALAR, SH_MATMUL,
    SH_DIM, SH_LAYERNORM, SH_CAST, SH_REDUCE, SH_CAT, SH_SEARCHSORTED
};

static const struct {
    const char *name;
    enum shape sh;
} EOPS[] = {
    /* The operators modelled after their real parameter lists first. */
    {"Add", SH_BINARY_ALPHA}, {"Mul", SH_BINARY}, {"Matmul", SH_MATMUL}, {"Softmax", SH_DIM},
    {"LayerNorm", SH_LAYERNORM}, {"Cast", SH_CAST}, {"Gelu", SH_UNARY}, {"Relu", SH_UNARY},
    {"Sub", SH_BINARY_ALPHA}, {"Rsub", SH_BINARY_ALPHA}, {"Div", SH_BINARY}, {"Mm", SH_MATMUL},
    {"BatchMatMul", SH_MATMUL}, {"LogSoftmax", SH_DIM}, {"ReduceSum", SH_REDUCE}, {"Mean", SH_REDUCE},
    {"Cat", SH_CAT}, {"SearchSorted", SH_SEARCHSORTED}, {"AddCustom", SH_BINARY}, {"SinhCustom", SH_UNARY},
    /* Elementwise. */
    {"Abs", SH_UNARY}, {"Exp", SH_UNARY}, {"Log", SH_UNARY}, {"Neg", SH_UNARY}, {"Sqrt", SH_UNARY},
    {"Rsqrt", SH_UNARY}, {"Sin", SH_UNARY}, {"Cos", SH_UNARY}, {"Tanh", SH_UNARY}, {"Sigmoid", SH_UNARY},
    {"Floor", SH_UNARY}, {"Ceil", SH_UNARY}, {"Round", SH_UNARY}, {"Sign", SH_UNARY}, {"Reciprocal", SH_UNARY},
    {"Erf", SH_UNARY}, {"Erfc", SH_UNARY}, {"Expm1", SH_UNARY}, {"Log1p", SH_UNARY}, {"Log10", SH_UNARY},
    {"Log2", SH_UNARY}, {"Asin", SH_UNARY}, {"Acos", SH_UNARY}, {"Atan", SH_UNARY}, {"Sinh", SH_UNARY},
    {"Cosh", SH_UNARY}, {"Silu", SH_UNARY}, {"Mish", SH_UNARY}, {"Selu", SH_UNARY}, {"Square", SH_UNARY},
    {"Trunc", SH_UNARY}, {"Frac", SH_UNARY}, {"Tan", SH_UNARY}, {"LogSigmoid", SH_UNARY},
    {"Hardsigmoid", SH_UNARY}, {"Hardswish", SH_UNARY}, {"IsFinite", SH_UNARY}, {"LogicalNot", SH_UNARY},
    {"Digamma", SH_UNARY}, {"Lgamma", SH_UNARY}, {"Exp2", SH_UNARY}, {"Atanh", SH_UNARY},
    {"Asinh", SH_UNARY}, {"Acosh", SH_UNARY}, {"Erfinv", SH_UNARY}, {"FastGelu", SH_UNARY},
    {"Softsign", SH_UNARY}, {"Sinc", SH_UNARY},
    {"Maximum", SH_BINARY}, {"Minimum", SH_BINARY}, {"EqTensor", SH_BINARY}, {"NeTensor", SH_BINARY},
    {"GtTensor", SH_BINARY}, {"GeTensor", SH_BINARY}, {"LtTensor", SH_BINARY}, {"LeTensor", SH_BINARY},
    {"LogicalAnd", SH_BINARY}, {"LogicalOr", SH_BINARY}, {"LogicalXor", SH_BINARY}, {"Atan2", SH_BINARY},
    {"FmodTensor", SH_BINARY}, {"FloorDivide", SH_BINARY}, {"RemainderTensorTensor", SH_BINARY},
    {"PowTensorTensor", SH_BINARY}, {"Prelu", SH_BINARY}, {"LogAddExp", SH_BINARY}, {"Heaviside", SH_BINARY},
    {"XLogYTensor", SH_BINARY}, {"SigmoidBackward", SH_BINARY}, {"TanhBackward", SH_BINARY},
    {"SiluBackward", SH_BINARY}, {"HardswishBackward", SH_BINARY}, {"GeluBackward", SH_BINARY},
    {"Muls", SH_TENSOR_SCALAR}, {"Divs", SH_TENSOR_SCALAR}, {"EqScalar", SH_TENSOR_SCALAR},
    {"NeScalar", SH_TENSOR_SCALAR}, {"GtScalar", SH_TENSOR_SCALAR}, {"GeScalar", SH_TENSOR_SCALAR},
    {"LtScalar", SH_TENSOR_SCALAR}, {"LeScalar", SH_TENSOR_SCALAR}, {"ClampMin", SH_TENSOR_SCALAR},
    {"ClampMax", SH_TENSOR_SCALAR}, {"LeakyRelu", SH_TENSOR_SCALAR}, {"Hardshrink", SH_TENSOR_SCALAR},
    {"Softshrink", SH_TENSOR_SCALAR}, {"Celu", SH_TENSOR_SCALAR}, {"FmodScalar", SH_TENSOR_SCALAR},
    {"FloorDivides", SH_TENSOR_SCALAR},
    {"InplaceRelu", SH_INPLACE}, {"InplaceSigmoid", SH_INPLACE}, {"InplaceExp", SH_INPLACE},
    {"InplaceTanh", SH_INPLACE}, {"InplaceSqrt", SH_INPLACE}, {"InplaceZero", SH_INPLACE},
    {"InplaceNeg", SH_INPLACE}, {"InplaceFloor", SH_INPLACE},
    {"InplaceMuls", SH_INPLACE_SCALAR}, {"InplaceDivs", SH_INPLACE_SCALAR},
    {"InplaceFillScalar", SH_INPLACE_SCALAR}, {"InplaceLeakyRelu", SH_INPLACE_SCALAR},
};
enum { N_EOPS = sizeof EOPS / sizeof EOPS[0] };

struct eop {
    const char *name;
    enum shape sh;
    char api[80];
    void *ws;
    aclnnRunFn run;
};
static struct eop eops[N_EOPS];
static int n_eops;

static void resolve_ops(void) {
    int limit = eopt.distinct > 0 && eopt.distinct < N_EOPS ? eopt.distinct : N_EOPS;
    for (int i = 0; i < limit; i++) {
        struct eop *o = &eops[n_eops++];
        char ws_name[128];
        o->name = EOPS[i].name;
        o->sh = EOPS[i].sh;
        snprintf(o->api, sizeof o->api, "aclnn%s", o->name);
        snprintf(ws_name, sizeof ws_name, "aclnn%sGetWorkspaceSize", o->name);
        o->ws = get_op_api(ws_name);
        *(void **)(&o->run) = get_op_api(o->api);
        if (!o->ws || !o->run) {
            fprintf(stderr, "npu-sim-app: no operator %s in the op libraries\n", o->api);
            exit(2);
        }
    }
}

/* ------------------------------------------------------------------ task queue */

enum { OBJ_TENSOR, OBJ_SCALAR, OBJ_INT_ARRAY, OBJ_TENSOR_LIST };
enum { TASK_ACLNN, TASK_ACLOP, TASK_STOP, TASK_OP };

struct etask {
    int kind, miss, nobj, op, variant;
    aclnnRunFn run;
    void *ws;
    uint64_t ws_size;
    aclOpExecutor *exec;
    struct {
        int kind;
        void *p;
    } obj[8];
    /* aclop */
    const char *op_type;
    int nin;
    aclTensorDesc *desc[3];
    aclDataBuffer *buf[3];
    aclopAttr *attr;
};

struct eworker {
    int id, device;
    aclrtStream stream;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct etask *q;
    int cap, head, count, busy;
    pthread_t producer, consumer;
    void *ws_pool;
    void *buf[16][4]; /* per shape: x, y, out, w */
    long ops, hits, misses, aclops;
};

static void enqueue(struct eworker *w, const struct etask *t) {
    pthread_mutex_lock(&w->mu);
    while (w->count == w->cap) pthread_cond_wait(&w->cv, &w->mu);
    w->q[(w->head + w->count) % w->cap] = *t;
    w->count++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Waits until the consumer ran everything queued. */
static void drain(struct eworker *w) {
    pthread_mutex_lock(&w->mu);
    while (w->count > 0 || w->busy) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static void destroy_objs(struct etask *t) {
    for (int i = 0; i < t->nobj; i++) {
        void *p = t->obj[i].p;
        switch (t->obj[i].kind) {
        case OBJ_TENSOR: CHECK(O.aclDestroyTensor(p)); break;
        case OBJ_SCALAR: CHECK(O.aclDestroyScalar(p)); break;
        case OBJ_INT_ARRAY: CHECK(O.aclDestroyIntArray(p)); break;
        default: CHECK(O.aclDestroyTensorList(p)); break;
        }
    }
}

static void eager_op_v2(struct eworker *w, const struct eop *o, int v);

/* torch_npu's ACL thread: sets the device, then runs queued tasks in order. */
static void *consumer_main(void *p) {
    struct eworker *w = p;
    CHECK(A.aclrtSetDevice(w->device));
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (w->count == 0) pthread_cond_wait(&w->cv, &w->mu);
        struct etask t = w->q[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        w->busy = 1;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        if (t.kind == TASK_STOP) break;
        if (t.kind == TASK_OP) {
            eager_op_v2(w, &eops[t.op], t.variant);
        } else if (t.kind == TASK_ACLNN) {
            CHECK(t.run(t.ws, t.ws_size, t.exec, w->stream));
            destroy_objs(&t);
            if (t.miss) O.ReleaseHugeMem(NULL, false);
        } else {
            pthread_once(&aclop_once, load_aclop);
            CHECK(aclop_fn(t.op_type, t.nin, t.desc, t.buf, 1, t.desc + t.nin, t.buf + t.nin, t.attr, ACL_ENGINE_SYS,
                           ACL_COMPILE_SYS, NULL, w->stream));
            for (int i = 0; i <= t.nin; i++) {
                O.aclDestroyTensorDesc(t.desc[i]);
                CHECK(O.aclDestroyDataBuffer(t.buf[i]));
            }
            O.aclopDestroyAttr(t.attr);
        }
        pthread_mutex_lock(&w->mu);
        w->busy = 0;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_lock(&w->mu);
    w->busy = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    CHECK(A.aclrtResetDevice(w->device));
    return NULL;
}

/* ------------------------------------------------------------------ one operator */

enum { COLS = 64 };

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* The tensor arguments of one call: rows x COLS, dtype, optionally a transposed (non-contiguous)
 * view. */
struct targ {
    int64_t dims[2], strides[2];
    int dtype;
    void *addr;
};

static struct targ make_targ(void *addr, int64_t rows, int dtype, int transposed) {
    struct targ t = {{rows, COLS}, {COLS, 1}, dtype, addr};
    if (transposed) {
        t.strides[0] = 1;
        t.strides[1] = rows;
    }
    return t;
}

static aclTensor *tensor_of(struct etask *t, const struct targ *a) {
    int64_t storage = a->dims[0] * a->dims[1];
    aclTensor *x = O.aclCreateTensor(a->dims, 2, a->dtype, a->strides, 0, ACL_FORMAT_ND, &storage, 1, a->addr);
    if (!x) fail("aclCreateTensor returned NULL");
    t->obj[t->nobj].kind = OBJ_TENSOR;
    t->obj[t->nobj++].p = x;
    return x;
}

static void *keep(struct etask *t, int kind, void *p) {
    if (!p) fail("creating an aclnn argument returned NULL");
    t->obj[t->nobj].kind = kind;
    t->obj[t->nobj++].p = p;
    return p;
}

/* Calls the first phase of `o` with arguments built from `in`, `in2`, `out`. */
static aclnnStatus first_phase(struct etask *t, const struct eop *o, const struct targ *in, const struct targ *in2,
                               const struct targ *out, uint64_t *ws, aclOpExecutor **ex) {
    float one = 1.0f;
    aclTensor *x = NULL, *y = NULL, *z = NULL;
    switch (o->sh) {
    case SH_UNARY:
        x = tensor_of(t, in), z = tensor_of(t, out);
        return ((wsUnary)o->ws)(x, z, ws, ex);
    case SH_BINARY:
        x = tensor_of(t, in), y = tensor_of(t, in2), z = tensor_of(t, out);
        return ((wsBinary)o->ws)(x, y, z, ws, ex);
    case SH_BINARY_ALPHA: {
        x = tensor_of(t, in), y = tensor_of(t, in2), z = tensor_of(t, out);
        aclScalar *alpha = keep(t, OBJ_SCALAR, O.aclCreateScalar(&one, ACL_FLOAT));
        return ((wsBinaryAlpha)o->ws)(x, y, alpha, z, ws, ex);
    }
    case SH_TENSOR_SCALAR: {
        x = tensor_of(t, in), z = tensor_of(t, out);
        aclScalar *s = keep(t, OBJ_SCALAR, O.aclCreateScalar(&one, ACL_FLOAT));
        return ((wsTensorScalar)o->ws)(x, s, z, ws, ex);
    }
    case SH_INPLACE:
        return ((wsInplace)o->ws)(tensor_of(t, out), ws, ex);
    case SH_INPLACE_SCALAR: {
        z = tensor_of(t, out);
        aclScalar *s = keep(t, OBJ_SCALAR, O.aclCreateScalar(&one, ACL_FLOAT));
        return ((wsInplaceScalar)o->ws)(z, s, ws, ex);
    }
    case SH_MATMUL: {
        struct targ w = *in2;
        w.dims[0] = COLS, w.strides[0] = COLS, w.strides[1] = 1;
        x = tensor_of(t, in), y = tensor_of(t, &w), z = tensor_of(t, out);
        return ((wsMatmul)o->ws)(x, y, z, 1, ws, ex);
    }
    case SH_DIM:
        x = tensor_of(t, in), z = tensor_of(t, out);
        return ((wsDim)o->ws)(x, -1, z, ws, ex);
    case SH_LAYERNORM: {
        int64_t norm = COLS;
        struct targ g = *in2;
        g.dims[0] = 1;
        aclIntArray *shape = keep(t, OBJ_INT_ARRAY, O.aclCreateIntArray(&norm, 1));
        x = tensor_of(t, in), y = tensor_of(t, &g), z = tensor_of(t, out);
        aclTensor *b = tensor_of(t, &g);
        return ((wsLayerNorm)o->ws)(x, shape, y, b, 1e-5, z, NULL, NULL, ws, ex);
    }
    case SH_CAST: {
        struct targ h = *out;
        h.dtype = ACL_FLOAT16;
        x = tensor_of(t, in), z = tensor_of(t, &h);
        return ((wsCast)o->ws)(x, ACL_FLOAT16, z, ws, ex);
    }
    case SH_REDUCE: {
        int64_t dim = 1;
        aclIntArray *dims = keep(t, OBJ_INT_ARRAY, O.aclCreateIntArray(&dim, 1));
        struct targ r = *out;
        r.dims[1] = 1, r.strides[0] = 1, r.strides[1] = 1;
        x = tensor_of(t, in), z = tensor_of(t, &r);
        return ((wsReduce)o->ws)(x, dims, false, ACL_FLOAT, z, ws, ex);
    }
    case SH_CAT: {
        int64_t storage = in->dims[0] * in->dims[1];
        const aclTensor *parts[2] = {
            O.aclCreateTensor(in->dims, 2, in->dtype, in->strides, 0, ACL_FORMAT_ND, &storage, 1, in->addr),
            O.aclCreateTensor(in2->dims, 2, in2->dtype, in2->strides, 0, ACL_FORMAT_ND, &storage, 1, in2->addr)};
        aclTensorList *list = keep(t, OBJ_TENSOR_LIST, O.aclCreateTensorList(parts, 2));
        z = tensor_of(t, out);
        return ((wsCat)o->ws)(list, 0, z, ws, ex);
    }
    case SH_SEARCHSORTED:
        x = tensor_of(t, in), y = tensor_of(t, in2), z = tensor_of(t, out);
        return ((wsSearchSorted)o->ws)(x, y, false, false, tensor_of(t, in), z, ws, ex);
    }
    return -1;
}

/* One operator call the torch_npu way (see the top of this file). Variant `v` picks the shape;
 * odd variants mix float16 into the second input (a Cast kernel for operators with two tensor
 * inputs) and variants 2 and 3 mod 4 write a transposed output (a ViewCopy kernel). */
static void variant_args(struct eworker *w, int v, struct targ *in, struct targ *in2, struct targ *out) {
    int64_t rows = 8 * (v + 1);
    int mixed = v % 2 == 1, transposed = v % 4 >= 2;
    void **b = w->buf[v];
    *in = make_targ(b[0], rows, ACL_FLOAT, 0);
    *in2 = make_targ(b[1], rows, mixed ? ACL_FLOAT16 : ACL_FLOAT, 0);
    *out = make_targ(b[2], rows, ACL_FLOAT, transposed);
}

static void eager_op(struct eworker *w, const struct eop *o, int v) {
    struct targ in, in2, out;
    variant_args(w, v, &in, &in2, &out);
    struct etask t;
    memset(&t, 0, sizeof t);
    t.kind = TASK_ACLNN;
    t.run = o->run;
    w->ops++;

    int cache = !eopt.no_cache && O.CanUsePTACache(o->api);
    if (cache) {
        uint64_t h = fnv(0xcbf29ce484222325ULL, o->api, strlen(o->api));
        h = fnv(h, &v, sizeof v);
        h = fnv(h, &w->device, sizeof w->device);
        h = fnv(h, &w->stream, sizeof w->stream);
        O.InitPTACacheThreadLocal();
        O.AddTensorAddrToCachedList(in.addr);
        O.AddTensorAddrToCachedList(in2.addr);
        O.AddTensorAddrToCachedList(out.addr);
        O.SetPTAHashKey(h);
        uint64_t ws = 0;
        aclOpExecutor *ex = O.PTAGetExecCache(h, &ws);
        if (ex) {
            t.exec = ex;
            t.ws_size = ws;
            t.ws = ws ? w->ws_pool : NULL;
            enqueue(w, &t);
            O.UnInitPTACacheThreadLocal();
            w->hits++;
            return;
        }
    }
    w->misses++;
    O.InitHugeMemThreadLocal(NULL, false);
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus rc = first_phase(&t, o, &in, &in2, &out, &ws, &ex);
    if (rc != 0 || !ex) {
        fail("%sGetWorkspaceSize = %d", o->api, rc);
        destroy_objs(&t);
    } else {
        t.exec = ex;
        t.ws_size = ws;
        t.ws = ws ? w->ws_pool : NULL;
        t.miss = 1;
        enqueue(w, &t);
    }
    O.UnInitHugeMemThreadLocal(NULL, false);
    if (cache) O.UnInitPTACacheThreadLocal();
}

/* EXEC_NPU_CMD_V2: everything on the consumer thread, the second phase right after the first. */
static void eager_op_v2(struct eworker *w, const struct eop *o, int v) {
    struct targ in, in2, out;
    variant_args(w, v, &in, &in2, &out);
    struct etask t;
    memset(&t, 0, sizeof t);
    int cache = !eopt.no_cache && O.CanUsePTACache(o->api);
    if (cache) {
        uint8_t key[128];
        size_t n = (size_t)snprintf((char *)key, sizeof key, "%s/%d/%d/%p", o->api, v, w->device, w->stream);
        O.InitPTACacheThreadLocal();
        O.AddTensorAddrToCachedList(in.addr);
        O.AddTensorAddrToCachedList(in2.addr);
        O.AddTensorAddrToCachedList(out.addr);
        O.SetPTACacheHashKey(key, n);
        uint64_t ws = 0;
        aclOpExecutor *ex = O.PTAFindExecCache(key, n, &ws);
        if (ex) {
            CHECK(o->run(ws ? w->ws_pool : NULL, ws, ex, w->stream));
            O.UnInitPTACacheThreadLocal();
            w->hits++;
            return;
        }
    }
    w->misses++;
    O.InitHugeMemThreadLocal(NULL, false);
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    aclnnStatus rc = first_phase(&t, o, &in, &in2, &out, &ws, &ex);
    if (rc != 0 || !ex) fail("%sGetWorkspaceSize = %d", o->api, rc);
    else CHECK(o->run(ws ? w->ws_pool : NULL, ws, ex, w->stream));
    destroy_objs(&t);
    O.ReleaseHugeMem(NULL, false);
    O.UnInitHugeMemThreadLocal(NULL, false);
    if (cache) O.UnInitPTACacheThreadLocal();
}

/* An operator without an aclnn implementation, through aclopCompileAndExecuteV2. */
static void eager_aclop(struct eworker *w, long i) {
    static const char *const types[] = {"Add", "Mul", "Relu", "Square"};
    struct etask t;
    memset(&t, 0, sizeof t);
    t.kind = TASK_ACLOP;
    t.op_type = types[i % 4];
    t.nin = i % 4 < 2 ? 2 : 1;
    int64_t dims[2] = {8, COLS};
    for (int k = 0; k <= t.nin; k++) {
        t.desc[k] = O.aclCreateTensorDesc(ACL_FLOAT, 2, dims, ACL_FORMAT_ND);
        t.buf[k] = O.aclCreateDataBuffer(w->buf[0][k], 8 * COLS * sizeof(float));
        if (!t.desc[k] || !t.buf[k]) fail("aclop descriptions returned NULL");
    }
    t.attr = O.aclopCreateAttr();
    if (i % 4 == 0) CHECK(O.aclopSetAttrFloat(t.attr, "alpha", 1.0f));
    enqueue(w, &t);
    w->aclops++;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double eager_t0;

static void *producer_main(void *p) {
    struct eworker *w = p;
    CHECK(A.aclrtSetDevice(w->device));
    CHECK(A.aclrtCreateStream(&w->stream));
    w->ws_pool = dev_alloc(32u << 20);
    for (int v = 0; v < eopt.shapes; v++)
        for (int k = 0; k < 4; k++) w->buf[v][k] = dev_alloc((size_t)(8 * (v + 1) > COLS ? 8 * (v + 1) : COLS) * COLS * 4);
    w->cap = eopt.queue_depth;
    w->q = calloc((size_t)w->cap, sizeof *w->q);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_create(&w->consumer, NULL, consumer_main, w);

    uint64_t r = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1);
    for (long i = 0; !stop_requested; i++) {
        if (eopt.seconds > 0 ? now_s() - eager_t0 >= eopt.seconds : i >= eopt.ops) break;
        if (eopt.aclop_every > 0 && i % eopt.aclop_every == eopt.aclop_every - 1) {
            eager_aclop(w, i / eopt.aclop_every);
        } else {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            int op = (int)((r >> 33) % (uint64_t)n_eops), v = (int)((r >> 17) % (uint64_t)eopt.shapes);
            if (eopt.task_queue == 2) {
                struct etask t;
                memset(&t, 0, sizeof t);
                t.kind = TASK_OP;
                t.op = op;
                t.variant = v;
                w->ops++;
                enqueue(w, &t);
            } else {
                eager_op(w, &eops[op], v);
            }
        }
        if (eopt.sync_every > 0 && i % eopt.sync_every == eopt.sync_every - 1) {
            drain(w);
            CHECK(A.aclrtSynchronizeStream(w->stream));
        }
    }
    struct etask stop;
    memset(&stop, 0, sizeof stop);
    stop.kind = TASK_STOP;
    enqueue(w, &stop);
    pthread_join(w->consumer, NULL);
    CHECK(A.aclrtSynchronizeStream(w->stream));
    CHECK(A.aclrtDestroyStream(w->stream));
    CHECK(A.aclrtFree(w->ws_pool));
    for (int v = 0; v < eopt.shapes; v++)
        for (int k = 0; k < 4; k++) CHECK(A.aclrtFree(w->buf[v][k]));
    free(w->q);
    CHECK(A.aclrtResetDevice(w->device));
    return NULL;
}

/* Error paths and a repeatable executor, on the main thread before the workload. */
static void eager_checks(void) {
    aclrtStream s;
    CHECK(A.aclrtCreateStream(&s));
    void *d = dev_alloc(8 * COLS * 4);
    struct targ a = make_targ(d, 8, ACL_FLOAT, 0);
    struct etask t;
    memset(&t, 0, sizeof t);
    aclTensor *x = tensor_of(&t, &a), *y = tensor_of(&t, &a), *z = tensor_of(&t, &a);
    float one = 1.0f;
    aclScalar *alpha = keep(&t, OBJ_SCALAR, O.aclCreateScalar(&one, ACL_FLOAT));
    wsBinaryAlpha add;
    aclnnRunFn add_run;
    *(void **)(&add) = get_op_api("aclnnAddGetWorkspaceSize");
    *(void **)(&add_run) = get_op_api("aclnnAdd");
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    EXPECT(add(NULL, y, alpha, z, &ws, &ex), 161001);                   /* ACLNN_ERR_PARAM_NULLPTR */
    EXPECT(add(x, y, alpha, z, NULL, &ex), 161001);                     /* no workspaceSize */
    EXPECT(add(x, (const aclTensor *)alpha, alpha, z, &ws, &ex), 161002); /* ACLNN_ERR_PARAM_INVALID */
    EXPECT(add_run(NULL, 0, (aclOpExecutor *)&ws, s), 161002);          /* not an executor */
    /* A repeatable executor runs twice, then is destroyed. */
    CHECK(add(x, y, alpha, z, &ws, &ex));
    CHECK(O.aclSetAclOpExecutorRepeatable(ex));
    CHECK(add_run(NULL, ws, ex, s));
    CHECK(add_run(NULL, ws, ex, s));
    CHECK(O.aclDestroyAclOpExecutor(ex));
    EXPECT(add_run(NULL, ws, ex, s), 161002);
    CHECK(A.aclrtSynchronizeStream(s));
    destroy_objs(&t);
    EXPECT(O.aclDestroyTensor(x), 161002); /* already destroyed */
    CHECK(A.aclrtFree(d));
    CHECK(A.aclrtDestroyStream(s));
}

static int scenario_eager(void) {
    if (eopt.shapes < 1) eopt.shapes = 1;
    if (eopt.shapes > 16) eopt.shapes = 16;
    if (eopt.queue_depth < 1) eopt.queue_depth = 1;
    load_ops_api();
    resolve_ops();
    CHECK(O.aclnnInit(NULL));
    eager_checks();
    int n = opt.threads > 0 ? opt.threads : 1;
    struct eworker *w = calloc((size_t)n, sizeof *w);
    eager_t0 = now_s();
    for (int i = 0; i < n; i++) {
        w[i].id = i;
        w[i].device = opt.device;
        pthread_create(&w[i].producer, NULL, producer_main, &w[i]);
    }
    long ops = 0, hits = 0, misses = 0, aclops = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].producer, NULL);
        ops += w[i].ops, hits += w[i].hits, misses += w[i].misses, aclops += w[i].aclops;
    }
    double s = now_s() - eager_t0;
    CHECK(O.aclnnFinalize());
    printf("npu-sim-app: eager done: %ld operators (%ld aclnn cache hits, %ld first phases, %ld aclop) of %d kinds "
           "from %d threads in %.3f s (%.0f ops/s)\n",
           ops + aclops, hits, misses, aclops, n_eops, n, s, (double)(ops + aclops) / s);
    free(w);
    return 0;
}
