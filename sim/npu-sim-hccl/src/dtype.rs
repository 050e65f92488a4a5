//! HCCL data types and reductions (elementwise, little-endian, on unaligned byte buffers).
use npu_sim_common::abi;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DType {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    /// Types that can be moved but not reduced (INT128, HIF8, FP8 variants), by size.
    Opaque(usize),
}

impl DType {
    pub(crate) fn from_hccl(v: u32) -> Result<DType, i32> {
        Ok(match v {
            0 => DType::I8,
            1 => DType::I16,
            2 => DType::I32,
            3 => DType::F16,
            4 => DType::F32,
            5 => DType::I64,
            6 => DType::U64,
            7 => DType::U8,
            8 => DType::U16,
            9 => DType::U32,
            10 => DType::F64,
            11 => DType::BF16,
            12 => DType::Opaque(16),
            14..=17 => DType::Opaque(1),
            _ => return Err(abi::HCCL_E_PARA),
        })
    }

    pub(crate) fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
            DType::Opaque(n) => n,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl ReduceOp {
    pub(crate) fn from_hccl(v: u32) -> Result<ReduceOp, i32> {
        Ok(match v {
            0 => ReduceOp::Sum,
            1 => ReduceOp::Prod,
            2 => ReduceOp::Max,
            3 => ReduceOp::Min,
            _ => return Err(abi::HCCL_E_PARA),
        })
    }
}

/// Whether `dt` can be reduced at all.
pub(crate) fn reducible(dt: DType) -> bool {
    !matches!(dt, DType::Opaque(_))
}

macro_rules! int_reduce {
    ($t:ty, $acc:expr, $src:expr, $op:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (a, s) in $acc.chunks_exact_mut(N).zip($src.chunks_exact(N)) {
            let x = <$t>::from_le_bytes(a.try_into().expect("chunk size"));
            let y = <$t>::from_le_bytes(s.try_into().expect("chunk size"));
            let r = match $op {
                ReduceOp::Sum => x.wrapping_add(y),
                ReduceOp::Prod => x.wrapping_mul(y),
                ReduceOp::Max => x.max(y),
                ReduceOp::Min => x.min(y),
            };
            a.copy_from_slice(&r.to_le_bytes());
        }
    }};
}

macro_rules! float_reduce {
    ($n:expr, $acc:expr, $src:expr, $op:expr, $load:expr, $store:expr) => {{
        for (a, s) in $acc.chunks_exact_mut($n).zip($src.chunks_exact($n)) {
            let x: f64 = $load(&*a);
            let y: f64 = $load(s);
            let r = match $op {
                ReduceOp::Sum => x + y,
                ReduceOp::Prod => x * y,
                ReduceOp::Max => x.max(y),
                ReduceOp::Min => x.min(y),
            };
            $store(a, r);
        }
    }};
}

/// `acc[i] = acc[i] op src[i]` for every element.
pub(crate) fn reduce(acc: &mut [u8], src: &[u8], dt: DType, op: ReduceOp) {
    match dt {
        DType::I8 => int_reduce!(i8, acc, src, op),
        DType::I16 => int_reduce!(i16, acc, src, op),
        DType::I32 => int_reduce!(i32, acc, src, op),
        DType::I64 => int_reduce!(i64, acc, src, op),
        DType::U8 => int_reduce!(u8, acc, src, op),
        DType::U16 => int_reduce!(u16, acc, src, op),
        DType::U32 => int_reduce!(u32, acc, src, op),
        DType::U64 => int_reduce!(u64, acc, src, op),
        DType::F32 => float_reduce!(
            4,
            acc,
            src,
            op,
            |b: &[u8]| f64::from(f32::from_le_bytes(b.try_into().expect("4 bytes"))),
            |a: &mut [u8], r: f64| a.copy_from_slice(&(r as f32).to_le_bytes())
        ),
        DType::F64 => float_reduce!(
            8,
            acc,
            src,
            op,
            |b: &[u8]| f64::from_le_bytes(b.try_into().expect("8 bytes")),
            |a: &mut [u8], r: f64| a.copy_from_slice(&r.to_le_bytes())
        ),
        DType::F16 => float_reduce!(
            2,
            acc,
            src,
            op,
            |b: &[u8]| f64::from(f16_to_f32(u16::from_le_bytes([b[0], b[1]]))),
            |a: &mut [u8], r: f64| a.copy_from_slice(&f32_to_f16(r as f32).to_le_bytes())
        ),
        DType::BF16 => float_reduce!(
            2,
            acc,
            src,
            op,
            |b: &[u8]| f64::from(f32::from_bits(
                u32::from(u16::from_le_bytes([b[0], b[1]])) << 16
            )),
            |a: &mut [u8], r: f64| a.copy_from_slice(&f32_to_bf16(r as f32).to_le_bytes())
        ),
        DType::Opaque(_) => {}
    }
}

fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    // Round to nearest, ties to even.
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: m * 2^-24.
            let v = m as f32 * f32::powi(2.0, -24);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    if x.is_nan() {
        return sign | 0x7e00;
    }
    let a = x.abs();
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < f32::powi(2.0, -14) {
        // Subnormal or zero: units of 2^-24, rounded to nearest even.
        return sign | (a * f32::powi(2.0, 24)).round_ties_even() as u16;
    }
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let man = b & 0x7f_ffff;
    let mut h = ((exp as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
        h += 1;
    }
    sign | h as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduces_ints_and_floats() {
        let mut a = [1i32, -5, 7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>();
        let b = [2i32, 3, -9]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>();
        reduce(&mut a, &b, DType::I32, ReduceOp::Max);
        assert_eq!(
            a,
            [2i32, 3, 7]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>()
        );
        let mut f = 1.5f32.to_le_bytes().to_vec();
        reduce(&mut f, &2.25f32.to_le_bytes(), DType::F32, ReduceOp::Sum);
        assert_eq!(f32::from_le_bytes(f.try_into().unwrap()), 3.75);
    }

    #[test]
    fn half_conversions_round_trip() {
        for v in [0.0f32, 1.0, -2.5, 0.333, 1000.0, 6.0e-5, 65504.0] {
            let h = f16_to_f32(f32_to_f16(v));
            assert!((h - v).abs() <= v.abs() * 1e-3 + 1e-7, "{v} -> {h}");
            let bf = f32::from_bits(u32::from(f32_to_bf16(v)) << 16);
            assert!((bf - v).abs() <= v.abs() * 1e-2, "{v} -> {bf}");
        }
    }
}
