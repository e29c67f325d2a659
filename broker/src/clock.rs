//! The broker's only clock. Decision code (`spool-core`, `spool-raft`) never reads time: the
//! glommio layer reads it here and passes `now_ms` in, so the simulator can pass its own.

/// Wall-clock milliseconds since the Unix epoch (record timestamps, commit times, expiry).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// [`now_ms`] as the unsigned milliseconds the decision cores take.
pub fn now_ms_u64() -> u64 {
    now_ms().max(0) as u64
}

/// Milliseconds on a monotonic clock (deadlines and waits: never jumps with the wall clock).
pub fn monotonic_ms() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// A 64-bit seed from the operating system's entropy, for the decision cores that need one
/// (topic ids, incarnation ids, member ids): drawn here, at the edge, once per use.
pub fn entropy_seed() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS's entropy once per process and then per instance; the
    // clock and the process id are mixed in so that two processes never share a seed.
    let mut h = RandomState::new().build_hasher();
    h.write_i64(now_ms());
    h.write_u32(std::process::id());
    h.finish()
}
