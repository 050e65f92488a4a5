//! The closed vocabularies of the text columns (`docs/schema.md`): each is an enum in the
//! pipeline and its upper- or lower-case name in the files, so a writer cannot emit a
//! value the readers do not know, and a reader can match on variants.

/// Declares an enum whose variants are written as fixed strings.
macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        /// The first value (rows are built from `Default` and then filled in).
        impl Default for $name {
            fn default() -> Self {
                Self::ALL[0]
            }
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The value as stored in the dataset.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value a stored string stands for, if it is one.
            pub fn parse(text: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

vocabulary! {
    /// `op.kind`: how an operator call ran.
    OpKind {
        /// A two-phase aclnn operator: `aclnnXxxGetWorkspaceSize`, then `aclnnXxx`.
        Aclnn = "aclnn",
        /// An operator compiled and run in one call (`aclopCompileAndExecuteV2`).
        Aclop = "aclop",
        /// A graph (model) execution (`aclmdlExecute*`).
        Model = "model",
    }
}

vocabulary! {
    /// `critical_event.kind`: what the user must know to trust the trace.
    EventKind {
        /// Records the BPF programs could not deliver (the message names the drop kind).
        RingBufferDrop = "ring_buffer_drop",
        /// A submitted device task whose completion never arrived while traced.
        MissingCompletion = "missing_completion",
        /// A device task that finished with an error status.
        DeviceError = "device_error",
        /// A device clock model whose error bound is too large to trust blindly.
        ClockModel = "clock_model",
        /// User-memory reads that failed in the BPF programs (the message names which).
        ProbeReadFailure = "probe_read_failure",
        /// A device's task times do not come from the profiling channel (the message says
        /// why: another profiler owns it, the driver lacks it).
        DeviceTimeSource = "device_time_source",
        /// Begin or end records of traced tasks that never arrived from a device's
        /// profiling channel (its buffer overflowed, or the task never ran to its end while
        /// traced); `count` says how many.
        ChannelRecordsLost = "channel_records_lost",
        /// The agent could not write its output (disk full, read-only or failing file
        /// system, output directory removed); the message says what and why, `count` the
        /// rows lost where some were.
        OutputWriteError = "output_write_error",
    }
}

vocabulary! {
    /// `critical_event.severity`.
    Severity {
        Warning = "warning",
        Error = "error",
    }
}

vocabulary! {
    /// `marker.kind`.
    MarkerKind {
        /// An instantaneous mark (`mstxMarkA`).
        Mark = "mark",
        /// A range (`mstxRangeStartA` .. `mstxRangeEnd`).
        Range = "range",
    }
}

vocabulary! {
    /// `memory.operation`.
    MemoryOperation {
        Allocation = "ALLOCATION",
        Release = "RELEASE",
    }
}

vocabulary! {
    /// `memory.memory_kind`.
    MemoryKind {
        Device = "DEVICE",
        /// Pinned host memory.
        Host = "HOST",
    }
}

vocabulary! {
    /// `memcpy.copy_kind`: msPTI's copy kinds.
    CopyKind {
        Unknown = "UNKNOWN",
        HostToHost = "HTOH",
        HostToDevice = "HTOD",
        DeviceToHost = "DTOH",
        DeviceToDevice = "DTOD",
        Default = "DEFAULT",
    }
}

vocabulary! {
    /// `kernel.kernel_type`: the compute unit, from the task's SQE type.
    KernelType {
        Unknown = "UNKNOWN",
        AiCore = "AI_CORE",
        AiCpu = "AI_CPU",
        AiVector = "AI_VECTOR",
    }
}

vocabulary! {
    /// `sync.kind`: what a synchronization task does, from its SQE type.
    SyncKind {
        Unknown = "UNKNOWN",
        EventRecord = "EVENT_RECORD",
        EventWait = "EVENT_WAIT",
        NotifyRecord = "NOTIFY_RECORD",
        NotifyWait = "NOTIFY_WAIT",
        /// A task that only marks a place in the stream: the record stream synchronize
        /// waits for, the runtime's flip task at a task-id wrap.
        PlaceHolder = "PLACE_HOLDER",
        WriteValue = "WRITE_VALUE",
        /// A model (graph) execution: the model's loaded tasks run while it runs.
        ModelExecute = "MODEL_EXECUTE",
    }
}

vocabulary! {
    /// `api.memcpy_kind`: the copy direction as CANN names it (`aclrtMemcpyKind` and
    /// `rtMemcpyKind_t` values, which the catalog decodes).
    MemcpyKind {
        Unknown = "UNKNOWN",
        HostToHost = "HOST_TO_HOST",
        HostToDevice = "HOST_TO_DEVICE",
        DeviceToHost = "DEVICE_TO_HOST",
        DeviceToDevice = "DEVICE_TO_DEVICE",
        Default = "DEFAULT",
        HostToBufToDevice = "HOST_TO_BUF_TO_DEVICE",
        InnerDeviceToDevice = "INNER_DEVICE_TO_DEVICE",
        InterDeviceToDevice = "INTER_DEVICE_TO_DEVICE",
        Managed = "MANAGED",
        AddrDeviceToDevice = "ADDR_DEVICE_TO_DEVICE",
        HostToDeviceEx = "HOST_TO_DEVICE_EX",
        DeviceToHostEx = "DEVICE_TO_HOST_EX",
    }
}

impl MemcpyKind {
    /// msPTI's copy kind for this direction.
    pub const fn copy_kind(self) -> CopyKind {
        match self {
            Self::HostToHost => CopyKind::HostToHost,
            Self::HostToDevice | Self::HostToDeviceEx | Self::HostToBufToDevice => {
                CopyKind::HostToDevice
            }
            Self::DeviceToHost | Self::DeviceToHostEx => CopyKind::DeviceToHost,
            Self::DeviceToDevice
            | Self::AddrDeviceToDevice
            | Self::InnerDeviceToDevice
            | Self::InterDeviceToDevice => CopyKind::DeviceToDevice,
            Self::Default => CopyKind::Default,
            Self::Managed | Self::Unknown => CopyKind::Unknown,
        }
    }
}

vocabulary! {
    /// `api.data_type`, `hccl.data_type`: `HcclDataType`.
    HcclDataType {
        Unknown = "UNKNOWN",
        Int8 = "INT8",
        Int16 = "INT16",
        Int32 = "INT32",
        Fp16 = "FP16",
        Fp32 = "FP32",
        Int64 = "INT64",
        Uint64 = "UINT64",
        Uint8 = "UINT8",
        Uint16 = "UINT16",
        Uint32 = "UINT32",
        Fp64 = "FP64",
        Bfp16 = "BFP16",
        Int128 = "INT128",
        Hif8 = "HIF8",
        Fp8E4m3 = "FP8E4M3",
        Fp8E5m2 = "FP8E5M2",
        Fp8E8m0 = "FP8E8M0",
    }
}

impl HcclDataType {
    /// Bytes per element; None for an unknown type.
    pub const fn size(self) -> Option<u64> {
        Some(match self {
            Self::Int8
            | Self::Uint8
            | Self::Hif8
            | Self::Fp8E4m3
            | Self::Fp8E5m2
            | Self::Fp8E8m0 => 1,
            Self::Int16 | Self::Uint16 | Self::Fp16 | Self::Bfp16 => 2,
            Self::Int32 | Self::Uint32 | Self::Fp32 => 4,
            Self::Int64 | Self::Uint64 | Self::Fp64 => 8,
            Self::Int128 => 16,
            Self::Unknown => return None,
        })
    }
}

vocabulary! {
    /// `api.reduce_op`, `hccl.reduce_op`: `HcclReduceOp`.
    ReduceOp {
        Unknown = "UNKNOWN",
        Sum = "SUM",
        Prod = "PROD",
        Max = "MAX",
        Min = "MIN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(*kind));
        }
        assert_eq!(CopyKind::parse("HTOD"), Some(CopyKind::HostToDevice));
        assert_eq!(Severity::parse("fatal"), None);
    }

    #[test]
    fn copy_kinds_follow_mspti() {
        assert_eq!(MemcpyKind::HostToDevice.copy_kind(), CopyKind::HostToDevice);
        assert_eq!(
            MemcpyKind::DeviceToHostEx.copy_kind(),
            CopyKind::DeviceToHost
        );
        assert_eq!(MemcpyKind::default().copy_kind(), CopyKind::Unknown);
        assert_eq!(HcclDataType::Fp32.size(), Some(4));
        assert_eq!(HcclDataType::Bfp16.size(), Some(2));
        assert_eq!(HcclDataType::Unknown.size(), None);
    }
}
