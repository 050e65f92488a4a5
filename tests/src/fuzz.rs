//! The seeded generator of the property tests on hostile input: every run damages its
//! inputs the same way, so a failure names its seed.

/// xorshift64*: small, deterministic, good enough to spread bytes.
pub struct Rng(u64);

impl Rng {
    /// The generator of run `seed` (spread, so that nearby seeds differ at once).
    pub fn for_seed(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    pub fn word(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.word() % n.max(1) as u64) as usize
    }
}
