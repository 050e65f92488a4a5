//! Decoders of CANN enum values into the schema's vocabularies.
use tracer_schema::vocab::{HcclDataType, MemcpyKind, ReduceOp};

/// `aclrtMemcpyKind`.
pub const fn acl_memcpy_kind(kind: u32) -> MemcpyKind {
    match kind {
        0 => MemcpyKind::HostToHost,
        1 => MemcpyKind::HostToDevice,
        2 => MemcpyKind::DeviceToHost,
        3 => MemcpyKind::DeviceToDevice,
        4 => MemcpyKind::Default,
        5 => MemcpyKind::HostToBufToDevice,
        6 => MemcpyKind::InnerDeviceToDevice,
        7 => MemcpyKind::InterDeviceToDevice,
        _ => MemcpyKind::Unknown,
    }
}

/// `rtMemcpyKind_t`.
pub const fn rt_memcpy_kind(kind: u32) -> MemcpyKind {
    match kind {
        0 => MemcpyKind::HostToHost,
        1 => MemcpyKind::HostToDevice,
        2 => MemcpyKind::DeviceToHost,
        3 => MemcpyKind::DeviceToDevice,
        4 => MemcpyKind::Managed,
        5 => MemcpyKind::AddrDeviceToDevice,
        6 => MemcpyKind::HostToDeviceEx,
        7 => MemcpyKind::DeviceToHostEx,
        8 => MemcpyKind::Default,
        _ => MemcpyKind::Unknown,
    }
}

/// `HcclDataType`, in the header's numbering.
pub fn hccl_data_type(t: u32) -> HcclDataType {
    use HcclDataType::*;
    const NUMBERED: [HcclDataType; 18] = [
        Int8, Int16, Int32, Fp16, Fp32, Int64, Uint64, Uint8, Uint16, Uint32, Fp64, Bfp16, Int128,
        Unknown, Hif8, Fp8E4m3, Fp8E5m2, Fp8E8m0,
    ];
    NUMBERED.get(t as usize).copied().unwrap_or(Unknown)
}

/// `HcclReduceOp`.
pub const fn hccl_reduce_op(op: u32) -> ReduceOp {
    match op {
        0 => ReduceOp::Sum,
        1 => ReduceOp::Prod,
        2 => ReduceOp::Max,
        3 => ReduceOp::Min,
        _ => ReduceOp::Unknown,
    }
}
