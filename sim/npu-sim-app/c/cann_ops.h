/* The operator-level CANN C API npu-sim-app's eager scenario uses, transcribed from the public
 * headers: libnnopbase.so (hicann/opbase include/nnopbase/aclnn/acl_meta.h, aclnn_base.h; the PTA
 * cache hooks op-plugin resolves by name, op_plugin/utils/op_api_common.h), the aclnn operators
 * of libopapi*.so / libcust_opapi.so (op_api/aclnn_*.h of hicann/ops-math and hicann/ops-nn),
 * aclop descriptions in libascendcl.so (acl_base.h, acl_op.h) and libacl_op_compiler.so
 * (acl_op_compiler.h). Like torch_npu, the scenario dlopens these libraries. */
#ifndef NPU_SIM_APP_CANN_OPS_H
#define NPU_SIM_APP_CANN_OPS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int32_t aclnnStatus;
typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclTensorDesc aclTensorDesc;
typedef struct aclDataBuffer aclDataBuffer;
typedef struct aclopAttr aclopAttr;

/* aclDataType, aclFormat, aclopEngineType, aclopCompileType values used. */
#define ACL_FLOAT 0
#define ACL_FLOAT16 1
#define ACL_INT32 3
#define ACL_FORMAT_ND 2
#define ACL_ENGINE_SYS 0
#define ACL_COMPILE_SYS 0

/* X(library, return type, name, parameter list). */
enum { LIB_NNOP, LIB_ASCENDCL };
#define NPU_SIM_OPS_API(X)                                                                                   \
    X(LIB_NNOP, aclTensor *, aclCreateTensor,                                                               \
      (const int64_t *viewDims, uint64_t viewDimsNum, int dataType, const int64_t *stride, int64_t offset,  \
       int format, const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData))                 \
    X(LIB_NNOP, aclScalar *, aclCreateScalar, (void *value, int dataType))                                  \
    X(LIB_NNOP, aclIntArray *, aclCreateIntArray, (const int64_t *value, uint64_t size))                    \
    X(LIB_NNOP, aclTensorList *, aclCreateTensorList, (const aclTensor *const *value, uint64_t size))      \
    X(LIB_NNOP, aclnnStatus, aclDestroyTensor, (const aclTensor *tensor))                                   \
    X(LIB_NNOP, aclnnStatus, aclDestroyScalar, (const aclScalar *scalar))                                   \
    X(LIB_NNOP, aclnnStatus, aclDestroyIntArray, (const aclIntArray *array))                                \
    X(LIB_NNOP, aclnnStatus, aclDestroyTensorList, (const aclTensorList *array))                            \
    X(LIB_NNOP, aclnnStatus, aclSetAclOpExecutorRepeatable, (aclOpExecutor * executor))                    \
    X(LIB_NNOP, aclnnStatus, aclDestroyAclOpExecutor, (aclOpExecutor * executor))                          \
    X(LIB_NNOP, aclnnStatus, aclnnInit, (const char *configPath))                                           \
    X(LIB_NNOP, aclnnStatus, aclnnFinalize, (void))                                                         \
    X(LIB_NNOP, aclOpExecutor *, PTAGetExecCache, (uint64_t hash, uint64_t *workspaceSize))                 \
    X(LIB_NNOP, void, InitPTACacheThreadLocal, (void))                                                      \
    X(LIB_NNOP, void, UnInitPTACacheThreadLocal, (void))                                                    \
    X(LIB_NNOP, void, SetPTAHashKey, (uint64_t hash))                                                       \
    X(LIB_NNOP, aclOpExecutor *, PTAFindExecCache, (uint8_t * buf, size_t len, uint64_t *workspaceSize))   \
    X(LIB_NNOP, void, SetPTACacheHashKey, (uint8_t * buf, size_t len))                                      \
    X(LIB_NNOP, bool, CanUsePTACache, (const char *api))                                                    \
    X(LIB_NNOP, void, AddTensorAddrToCachedList, (void *addr))                                              \
    X(LIB_NNOP, int, InitHugeMemThreadLocal, (void *arg, bool sync))                                        \
    X(LIB_NNOP, void, UnInitHugeMemThreadLocal, (void *arg, bool sync))                                     \
    X(LIB_NNOP, void, ReleaseHugeMem, (void *arg, bool sync))                                               \
    X(LIB_ASCENDCL, aclTensorDesc *, aclCreateTensorDesc,                                                   \
      (int dataType, int numDims, const int64_t *dims, int format))                                         \
    X(LIB_ASCENDCL, void, aclDestroyTensorDesc, (const aclTensorDesc *desc))                                \
    X(LIB_ASCENDCL, aclDataBuffer *, aclCreateDataBuffer, (void *data, size_t size))                        \
    X(LIB_ASCENDCL, int, aclDestroyDataBuffer, (const aclDataBuffer *dataBuffer))                           \
    X(LIB_ASCENDCL, aclopAttr *, aclopCreateAttr, (void))                                                   \
    X(LIB_ASCENDCL, void, aclopDestroyAttr, (const aclopAttr *attr))                                        \
    X(LIB_ASCENDCL, int, aclopSetAttrFloat, (aclopAttr * attr, const char *attrName, float attrValue))

/* libacl_op_compiler.so, which torch_npu dlopens when it first needs it. */
typedef int (*aclopCompileAndExecuteV2Fn)(const char *opType, int numInputs, aclTensorDesc *inputDesc[],
                                          aclDataBuffer *inputs[], int numOutputs, aclTensorDesc *outputDesc[],
                                          aclDataBuffer *outputs[], aclopAttr *attr, int engineType,
                                          int compileFlag, const char *opPath, void *stream);

/* Second phase of every aclnn operator. */
typedef aclnnStatus (*aclnnRunFn)(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, void *stream);

/* First phases, by parameter list (each ends with uint64_t *workspaceSize, aclOpExecutor **executor). */
#define WS_TAIL uint64_t *workspaceSize, aclOpExecutor **executor
typedef aclnnStatus (*wsUnary)(const aclTensor *self, aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsBinary)(const aclTensor *self, const aclTensor *other, aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsBinaryAlpha)(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                     aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsTensorScalar)(const aclTensor *self, const aclScalar *other, aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsInplace)(aclTensor *selfRef, WS_TAIL);
typedef aclnnStatus (*wsInplaceScalar)(aclTensor *selfRef, const aclScalar *other, WS_TAIL);
typedef aclnnStatus (*wsMatmul)(const aclTensor *self, const aclTensor *mat2, aclTensor *out, int8_t cubeMathType,
                                WS_TAIL);
typedef aclnnStatus (*wsDim)(const aclTensor *self, int64_t dim, aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsLayerNorm)(const aclTensor *input, const aclIntArray *normalizedShape,
                                   const aclTensor *weightOptional, const aclTensor *biasOptional, double eps,
                                   aclTensor *out, aclTensor *meanOutOptional, aclTensor *rstdOutOptional, WS_TAIL);
typedef aclnnStatus (*wsCast)(const aclTensor *self, int dtype, aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsReduce)(const aclTensor *self, const aclIntArray *dims, bool keepDims, int dtype,
                                aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsCat)(const aclTensorList *tensors, int64_t dim, aclTensor *out, WS_TAIL);
typedef aclnnStatus (*wsSearchSorted)(const aclTensor *sortedSequence, const aclTensor *self, bool outInt32,
                                      bool right, const aclTensor *sorter, aclTensor *out, WS_TAIL);

#endif
