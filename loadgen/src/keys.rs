//! Record keys: `none`, `uniform:N` and `zipf:N:S` (parsed from `--keys`), drawn from a small
//! deterministic PRNG so a run is reproducible from its seed. Pure: no I/O, no clock.

/// Largest key space a zipf distribution may use: its CDF table costs 8 bytes per key.
pub const ZIPF_KEYS_MAX: u64 = 10_000_000;

/// splitmix64: tiny, fast, and good enough to spread keys (not for cryptography).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, n)`; `n` must be > 0 (callers validate it at parse time).
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift; the tiny bias is irrelevant for load generation.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// What `--keys` asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySpec {
    None,
    Uniform { keys: u64 },
    Zipf { keys: u64, exponent: f64 },
}

impl std::str::FromStr for KeySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let count = |p: &str| -> Result<u64, String> {
            match p.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("key count `{p}` must be a positive integer")),
            }
        };
        match parts.as_slice() {
            ["none"] => Ok(Self::None),
            ["uniform", n] => Ok(Self::Uniform { keys: count(n)? }),
            ["zipf", n, e] => {
                let keys = count(n)?;
                if keys > ZIPF_KEYS_MAX {
                    return Err(format!("zipf key count must be ≤ {ZIPF_KEYS_MAX}"));
                }
                match e.parse::<f64>() {
                    Ok(exponent) if exponent.is_finite() && exponent > 0.0 => {
                        Ok(Self::Zipf { keys, exponent })
                    }
                    _ => Err(format!("zipf exponent `{e}` must be a positive number")),
                }
            }
            _ => Err(format!(
                "`{s}`: expected none, uniform:N or zipf:N:S (e.g. zipf:1000:1.1)"
            )),
        }
    }
}

/// Draws key indexes for one producer.
#[derive(Debug, Clone)]
pub enum KeyGen {
    None,
    Uniform {
        keys: u64,
    },
    /// Cumulative probabilities of ranks 1..=N; a draw is a binary search.
    Zipf {
        cdf: Vec<f64>,
    },
}

impl KeyGen {
    pub fn new(spec: &KeySpec) -> Self {
        match *spec {
            KeySpec::None => Self::None,
            KeySpec::Uniform { keys } => Self::Uniform { keys },
            KeySpec::Zipf { keys, exponent } => {
                let mut cdf = Vec::with_capacity(keys as usize);
                let mut sum = 0.0;
                for rank in 1..=keys {
                    sum += 1.0 / (rank as f64).powf(exponent);
                    cdf.push(sum);
                }
                for c in &mut cdf {
                    *c /= sum;
                }
                Self::Zipf { cdf }
            }
        }
    }

    /// The next key index, or `None` for keyless records.
    pub fn next_index(&self, rng: &mut Rng) -> Option<u64> {
        match self {
            Self::None => None,
            Self::Uniform { keys } => Some(rng.below(*keys)),
            Self::Zipf { cdf } => {
                let u = rng.next_f64();
                let i = cdf.partition_point(|&c| c < u);
                Some(i.min(cdf.len().saturating_sub(1)) as u64)
            }
        }
    }

    /// The key bytes for an index (`k` + decimal), as operators would see them with `kcat`.
    pub fn key_bytes(index: u64) -> Vec<u8> {
        format!("k{index}").into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms_and_rejects_bad_ones() {
        assert_eq!("none".parse::<KeySpec>(), Ok(KeySpec::None));
        assert_eq!(
            "uniform:10".parse::<KeySpec>(),
            Ok(KeySpec::Uniform { keys: 10 })
        );
        assert_eq!(
            "zipf:100:1.5".parse::<KeySpec>(),
            Ok(KeySpec::Zipf {
                keys: 100,
                exponent: 1.5
            })
        );
        for bad in [
            "",
            "uniform",
            "uniform:0",
            "uniform:-1",
            "zipf:10",
            "zipf:10:0",
            "zipf:10:nan",
            "zipf:0:1",
            "zipf:99999999999:1",
            "hash:3",
        ] {
            assert!(bad.parse::<KeySpec>().is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let g = KeyGen::new(&KeySpec::Uniform { keys: 8 });
        let mut rng = Rng::new(1);
        let mut seen = [0u32; 8];
        for _ in 0..8_000 {
            let k = g.next_index(&mut rng).unwrap_or(u64::MAX);
            assert!(k < 8);
            seen[k as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 700 && n < 1300), "{seen:?}");
    }

    #[test]
    fn zipf_favours_low_ranks_and_stays_in_range() {
        let g = KeyGen::new(&KeySpec::Zipf {
            keys: 100,
            exponent: 1.2,
        });
        let mut rng = Rng::new(7);
        let mut seen = vec![0u32; 100];
        for _ in 0..20_000 {
            let k = g.next_index(&mut rng).unwrap_or(u64::MAX);
            assert!(k < 100);
            seen[k as usize] += 1;
        }
        assert!(seen[0] > seen[1] && seen[1] > seen[9] && seen[9] > seen[99]);
    }

    #[test]
    fn none_has_no_keys_and_keys_render_as_text() {
        assert_eq!(
            KeyGen::new(&KeySpec::None).next_index(&mut Rng::new(3)),
            None
        );
        assert_eq!(KeyGen::key_bytes(42), b"k42".to_vec());
    }
}
