//! The device clock: a syscnt counter derived from the host's CLOCK_MONOTONIC with an offset
//! and a drift, `cnt = floor((host_ns + offset_ns) * (1 + drift_ppm/1e6) * freq_hz / 1e9)`
//! (drift applied in whole parts per billion).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    pub freq_hz: u64,
    pub offset_ns: i64,
    pub drift_ppm: f64,
}

impl Clock {
    /// The syscnt value at host CLOCK_MONOTONIC time `host_ns`.
    pub(crate) fn cnt_at(&self, host_ns: u64) -> u64 {
        let t = (i128::from(host_ns) + i128::from(self.offset_ns)).max(0);
        let drift_ppb = (self.drift_ppm * 1000.0).round() as i128;
        let cnt =
            t * i128::from(self.freq_hz) * (1_000_000_000 + drift_ppb) / 1_000_000_000_000_000_000;
        cnt.clamp(0, i128::from(u64::MAX)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_with_offset_and_drift() {
        let c = Clock {
            freq_hz: 50_000_000,
            offset_ns: 1_000_000_000,
            drift_ppm: 0.0,
        };
        assert_eq!(c.cnt_at(0), 50_000_000);
        assert_eq!(c.cnt_at(1_000_000_000), 100_000_000);
        let d = Clock {
            drift_ppm: 35.0,
            ..c
        };
        // 2 s of (host + offset) at +35 ppm: 100e6 * 1.000035
        assert_eq!(d.cnt_at(1_000_000_000), 100_003_500);
    }
}
