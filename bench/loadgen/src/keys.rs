//! Which key the next request uses: sequential, uniform or Zipf over a range.

/// A small, fast generator (SplitMix64): one per client, seeded apart.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Each client walks the range in order from its own offset (as
    /// memtier's `S`): with many clients, the whole range is written once
    /// per `range / clients` requests of each.
    Sequential,
    Uniform,
    /// Zipf with this exponent: key 1 is the most popular.
    Zipf(f64),
}

/// Draws keys in `[min, max]` by `pattern`.
pub struct KeyGen {
    min: u64,
    n: u64,
    pattern: Pattern,
    next_seq: u64,
    zipf: Option<Zipf>,
}

impl KeyGen {
    /// `client`/`clients` spread sequential walks over the range.
    pub fn new(pattern: Pattern, min: u64, max: u64, client: u64, clients: u64) -> KeyGen {
        let n = max - min + 1;
        let zipf = match pattern {
            Pattern::Zipf(s) => Some(Zipf::new(n, s)),
            _ => None,
        };
        KeyGen { min, n, pattern, next_seq: n / clients.max(1) * client, zipf }
    }

    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let k = match self.pattern {
            Pattern::Sequential => {
                let k = self.next_seq % self.n;
                self.next_seq += 1;
                k
            }
            Pattern::Uniform => rng.next_u64() % self.n,
            Pattern::Zipf(_) => self.zipf.as_ref().expect("zipf").sample(rng) - 1,
        };
        self.min + k
    }
}

/// Zipf over 1..=n with exponent `s` > 0, by rejection-inversion
/// (Hörmann and Derflinger, 1996): constant time per draw, no table.
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        assert!(n >= 1 && s > 0.0, "zipf needs n >= 1 and an exponent > 0");
        let n = n as f64;
        let z = Zipf { n, s, h_x1: 0.0, h_n: 0.0, cut: 0.0 };
        let h_x1 = z.h(1.5) - 1.0;
        let h_n = z.h(n + 0.5);
        let cut = 2.0 - z.h_inv(z.h(2.5) - (2.0f64).powf(-s));
        Zipf { h_x1, h_n, cut, ..z }
    }

    /// The integral of x^-s, shifted so that it is continuous at s = 1.
    fn h(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper1((1.0 - self.s) * log_x) * log_x
    }

    fn h_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper2(t) * x).exp()
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = self.h_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.h(k + 0.5) - (-self.s * k.ln()).exp() {
                return k as u64;
            }
        }
    }
}

/// (e^x - 1) / x, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 { x.exp_m1() / x } else { 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x)) }
}

/// ln(1 + x) / x, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 { x.ln_1p() / x } else { 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_frequencies_follow_the_power_law() {
        // P(k) = k^-s / H(n, s): compare the first ranks' shares.
        let (n, s) = (1000u64, 0.99);
        let z = Zipf::new(n, s);
        let mut rng = Rng::new(7);
        let draws = 400_000;
        let mut counts = vec![0u64; n as usize + 1];
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!((1..=n).contains(&k));
            counts[k as usize] += 1;
        }
        let norm: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
        for k in [1usize, 2, 5, 10, 100] {
            let expected = (k as f64).powf(-s) / norm * draws as f64;
            let got = counts[k] as f64;
            assert!((got - expected).abs() < expected * 0.05 + 30.0, "rank {k}: {got} drawn, {expected:.0} expected");
        }
    }

    #[test]
    fn sequential_walks_cover_the_range_once_per_lap() {
        let mut rng = Rng::new(1);
        let mut g = KeyGen::new(Pattern::Sequential, 10, 19, 0, 1);
        let keys: Vec<u64> = (0..20).map(|_| g.next(&mut rng)).collect();
        assert_eq!(&keys[..10], &(10..20).collect::<Vec<_>>()[..]);
        assert_eq!(&keys[10..], &keys[..10]);
    }

    #[test]
    fn uniform_stays_in_range() {
        let mut rng = Rng::new(3);
        let mut g = KeyGen::new(Pattern::Uniform, 5, 9, 0, 1);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let k = g.next(&mut rng);
            assert!((5..=9).contains(&k));
            seen[(k - 5) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
