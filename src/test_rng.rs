//! The unit tests' seeded random numbers: xorshift64 (Marsaglia), the same
//! numbers on every run from the same seed.

/// A xorshift64 generator; its state is the seed until the first number
/// (never 0).
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next number below `n` (> 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
