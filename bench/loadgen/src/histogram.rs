//! Latency histogram: log-linear buckets (64 per power of two, under 1.6 %
//! error), mergeable across clients and threads.

const SUB: u32 = 64;

#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; (64 * SUB) as usize], total: 0, max: 0 }
    }
}

fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= 6
    let shift = exp - SUB.trailing_zeros();
    let mantissa = (v >> shift) as u32 - SUB; // 0..SUB
    ((exp - SUB.trailing_zeros() + 1) * SUB + mantissa) as usize
}

/// The lowest value of a bucket.
fn low(b: usize) -> u64 {
    let b = b as u32;
    if b < SUB {
        return b as u64;
    }
    let shift = b / SUB - 1;
    ((SUB + b % SUB) as u64) << shift
}

impl Histogram {
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value below which `q` (0..=1) of the recorded values fall.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return low(b).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..10_000_000u64).step_by(997) {
            let b = bucket(v);
            assert!(b >= last);
            last = b;
            assert!(low(b) <= v, "{v}: bucket {b} starts at {}", low(b));
            assert!((v - low(b)) as f64 <= v as f64 / 60.0 + 1.0, "{v} vs {}", low(b));
        }
    }

    #[test]
    fn quantiles_of_a_uniform_spread() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, want) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.02, "q{q}: {got}");
        }
        assert_eq!(h.quantile(1.0), 100_000u64.min(h.quantile(1.0)));
    }
}
