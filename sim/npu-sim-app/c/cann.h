/* The subset of the CANN C API (acl, rt, hccl, mstx) that npu-sim-app uses, transcribed from
 * the public headers (see shared/reference/cann_abi.h). */
#ifndef NPU_SIM_APP_CANN_H
#define NPU_SIM_APP_CANN_H
#include <stddef.h>
#include <stdint.h>

typedef int aclError;
typedef int32_t rtError_t;
typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtBinHandle;
typedef void *aclrtFuncHandle;
typedef void *rtStream_t;
typedef struct aclmdlDataset aclmdlDataset;

enum { ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE };
enum { ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY };

typedef struct { uint32_t magic; uint32_t version; const void *data; uint64_t length; } rtDevBinary_t;
#define RT_DEV_BINARY_MAGIC_ELF 0x43554245U
#define RT_DEV_BINARY_MAGIC_ELF_AIVEC 0x41415246U
#define RT_MEMORY_HBM 0x2U

typedef struct {
    void *args; void *hostInputInfoPtr; uint32_t argsSize; uint16_t tilingAddrOffset; uint16_t tilingDataOffset;
    uint16_t hostInputInfoNum; uint8_t hasTiling; uint8_t isNoNeedH2DCopy; uint8_t reserved[4];
} rtArgsEx_t;

/* aclrtBinaryLoadOptions: option type 2 (ACL_RT_BINARY_LOAD_OPT_MAGIC) carries the binary magic. */
typedef struct { uint32_t type; union { uint32_t magic; uint32_t rsv[4]; } value; } aclrtBinaryLoadOption;
typedef struct { aclrtBinaryLoadOption *options; size_t numOpt; } aclrtBinaryLoadOptions;
#define ACL_RT_BINARY_LOAD_OPT_MAGIC 2

typedef int HcclResult;
typedef void *HcclComm;
#define HCCL_ROOT_INFO_BYTES 4108
typedef struct { char internal[HCCL_ROOT_INFO_BYTES]; } HcclRootInfo;
enum { HCCL_REDUCE_SUM = 0, HCCL_REDUCE_PROD = 1, HCCL_REDUCE_MAX = 2, HCCL_REDUCE_MIN = 3 };
enum { HCCL_DATA_TYPE_INT32 = 2, HCCL_DATA_TYPE_FP32 = 4 };

typedef uint64_t mstxRangeId;
typedef void *mstxDomainHandle_t;

/* X(library, return type, name, parameter list) for every function the app calls. */
#define NPU_SIM_API(X)                                                                                      \
    X(ACL, aclError, aclInit, (const char *configPath))                                                    \
    X(ACL, aclError, aclFinalize, (void))                                                                  \
    X(ACL, aclError, aclrtSetDevice, (int32_t deviceId))                                                   \
    X(ACL, aclError, aclrtResetDevice, (int32_t deviceId))                                                 \
    X(ACL, aclError, aclrtGetDevice, (int32_t *deviceId))                                                  \
    X(ACL, aclError, aclrtSynchronizeDevice, (void))                                                       \
    X(ACL, aclError, aclrtCreateStream, (aclrtStream *stream))                                             \
    X(ACL, aclError, aclrtDestroyStream, (aclrtStream stream))                                             \
    X(ACL, aclError, aclrtSynchronizeStream, (aclrtStream stream))                                         \
    X(ACL, aclError, aclrtStreamWaitEvent, (aclrtStream stream, aclrtEvent event))                         \
    X(ACL, aclError, aclrtCreateEvent, (aclrtEvent *event))                                                \
    X(ACL, aclError, aclrtDestroyEvent, (aclrtEvent event))                                                \
    X(ACL, aclError, aclrtRecordEvent, (aclrtEvent event, aclrtStream stream))                             \
    X(ACL, aclError, aclrtSynchronizeEvent, (aclrtEvent event))                                            \
    X(ACL, aclError, aclrtMalloc, (void **devPtr, size_t size, int policy))                                \
    X(ACL, aclError, aclrtFree, (void *devPtr))                                                            \
    X(ACL, aclError, aclrtMallocHost, (void **hostPtr, size_t size))                                       \
    X(ACL, aclError, aclrtFreeHost, (void *hostPtr))                                                       \
    X(ACL, aclError, aclrtMemcpy, (void *dst, size_t destMax, const void *src, size_t count, int kind))    \
    X(ACL, aclError, aclrtMemcpyAsync,                                                                     \
      (void *dst, size_t destMax, const void *src, size_t count, int kind, aclrtStream stream))            \
    X(ACL, aclError, aclrtMemset, (void *devPtr, size_t maxCount, int32_t value, size_t count))            \
    X(ACL, aclError, aclrtMemsetAsync,                                                                     \
      (void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream))                    \
    X(ACL, aclError, aclrtBinaryLoadFromData,                                                              \
      (const void *data, size_t length, const aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle)) \
    X(ACL, aclError, aclrtBinaryGetFunction,                                                               \
      (aclrtBinHandle binHandle, const char *kernelName, aclrtFuncHandle *funcHandle))                     \
    X(ACL, aclError, aclrtLaunchKernel,                                                                    \
      (aclrtFuncHandle funcHandle, uint32_t blockDim, const void *argsData, size_t argsSize,               \
       aclrtStream stream))                                                                                \
    X(ACL, aclError, aclmdlLoadFromMem, (const void *model, size_t modelSize, uint32_t *modelId))          \
    X(ACL, aclError, aclmdlExecute, (uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output))  \
    X(ACL, aclError, aclmdlExecuteAsync,                                                                   \
      (uint32_t modelId, const aclmdlDataset *input, aclmdlDataset *output, aclrtStream stream))           \
    X(ACL, aclError, aclmdlUnload, (uint32_t modelId))                                                     \
    X(RT, rtError_t, rtGetDeviceCount, (int32_t *cnt))                                                     \
    X(RT, rtError_t, rtMalloc, (void **devPtr, uint64_t size, uint32_t type, uint16_t moduleId))           \
    X(RT, rtError_t, rtFree, (void *devPtr))                                                               \
    X(RT, rtError_t, rtDevBinaryRegister, (const rtDevBinary_t *bin, void **hdl))                          \
    X(RT, rtError_t, rtRegisterAllKernel, (const rtDevBinary_t *bin, void **hdl))                          \
    X(RT, rtError_t, rtFunctionRegister,                                                                   \
      (void *binHandle, const void *stubFunc, const char *stubName, const void *kernelInfoExt,             \
       uint32_t funcMode))                                                                                 \
    X(RT, rtError_t, rtKernelLaunch,                                                                       \
      (const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize, void *smDesc, rtStream_t stm)) \
    X(RT, rtError_t, rtKernelLaunchWithHandleV2,                                                           \
      (void *hdl, const uint64_t tilingKey, uint32_t blockDim, rtArgsEx_t *argsInfo, void *smDesc,         \
       rtStream_t stm, const void *cfgInfo))                                                               \
    X(RT, rtError_t, rtCpuKernelLaunch,                                                                    \
      (const void *soName, const void *kernelName, uint32_t blockDim, const void *args, uint32_t argsSize, \
       void *smDesc, rtStream_t stm))                                                                      \
    X(RT, rtError_t, rtGetTaskIdAndStreamID, (uint32_t *taskId, uint32_t *streamId))                       \
    X(HCCL, HcclResult, HcclGetRootInfo, (HcclRootInfo *rootInfo))                                         \
    X(HCCL, HcclResult, HcclCommInitRootInfo,                                                              \
      (uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank, HcclComm *comm))                      \
    X(HCCL, HcclResult, HcclAllReduce,                                                                     \
      (void *sendBuf, void *recvBuf, uint64_t count, int dataType, int op, HcclComm comm,                  \
       aclrtStream stream))                                                                                \
    X(HCCL, HcclResult, HcclBroadcast,                                                                     \
      (void *buf, uint64_t count, int dataType, uint32_t root, HcclComm comm, aclrtStream stream))         \
    X(HCCL, HcclResult, HcclAllGather,                                                                     \
      (void *sendBuf, void *recvBuf, uint64_t sendCount, int dataType, HcclComm comm, aclrtStream stream)) \
    X(HCCL, HcclResult, HcclReduceScatter,                                                                 \
      (void *sendBuf, void *recvBuf, uint64_t recvCount, int dataType, int op, HcclComm comm,              \
       aclrtStream stream))                                                                                \
    X(HCCL, HcclResult, HcclReduce,                                                                        \
      (void *sendBuf, void *recvBuf, uint64_t count, int dataType, int op, uint32_t root, HcclComm comm,   \
       aclrtStream stream))                                                                                \
    X(HCCL, HcclResult, HcclAlltoAll,                                                                      \
      (const void *sendBuf, uint64_t sendCount, int sendType, const void *recvBuf, uint64_t recvCount,     \
       int recvType, HcclComm comm, aclrtStream stream))                                                   \
    X(HCCL, HcclResult, HcclSend,                                                                          \
      (void *sendBuf, uint64_t count, int dataType, uint32_t destRank, HcclComm comm, aclrtStream stream)) \
    X(HCCL, HcclResult, HcclRecv,                                                                          \
      (void *recvBuf, uint64_t count, int dataType, uint32_t srcRank, HcclComm comm, aclrtStream stream))  \
    X(HCCL, HcclResult, HcclBarrier, (HcclComm comm, aclrtStream stream))                                  \
    X(HCCL, HcclResult, HcclGetRankId, (HcclComm comm, uint32_t *rank))                                    \
    X(HCCL, HcclResult, HcclGetRankSize, (HcclComm comm, uint32_t *rankSize))                              \
    X(HCCL, HcclResult, HcclCommDestroy, (HcclComm comm))                                                  \
    X(MSTX, void, mstxMarkA, (const char *message, aclrtStream stream))                                    \
    X(MSTX, mstxRangeId, mstxRangeStartA, (const char *message, aclrtStream stream))                       \
    X(MSTX, void, mstxRangeEnd, (mstxRangeId id))                                                          \
    X(MSTX, mstxDomainHandle_t, mstxDomainCreateA, (const char *name))                                     \
    X(MSTX, void, mstxDomainDestroy, (mstxDomainHandle_t handle))                                          \
    X(MSTX, void, mstxDomainMarkA, (mstxDomainHandle_t handle, const char *message, aclrtStream stream))   \
    X(MSTX, mstxRangeId, mstxDomainRangeStartA,                                                            \
      (mstxDomainHandle_t handle, const char *message, aclrtStream stream))                                \
    X(MSTX, void, mstxDomainRangeEnd, (mstxDomainHandle_t handle, mstxRangeId id))

#define NPU_SIM_DECLARE(lib, ret, name, params) ret name params;
NPU_SIM_API(NPU_SIM_DECLARE)
#undef NPU_SIM_DECLARE

#endif
