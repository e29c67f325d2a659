//! The CPU time this process has used (user + system, all threads, from `getrusage`), so the
//! report can state what the load generator itself cost per byte it moved (`cpu_s=`), apart from
//! the broker's.

/// User plus system CPU seconds of the whole process so far (all its threads, exited ones
/// included); 0 if `getrusage` fails, which it does not for `RUSAGE_SELF`.
pub fn process_cpu_s() -> f64 {
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is to `r`, which lives across the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(r.ru_utime) + s(r.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_work_done_on_another_thread() {
        let before = process_cpu_s();
        // Work on a thread that exits: RUSAGE_SELF must count it (RUSAGE_THREAD would not).
        std::thread::spawn(|| {
            let start = process_cpu_s();
            let mut x = 1u64;
            // Bounded: stops after 20 ms of CPU or 2^34 rounds, whichever first.
            for i in 0..(1u64 << 34) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
                if i % (1 << 16) == 0 && process_cpu_s() - start >= 0.02 {
                    break;
                }
            }
            std::hint::black_box(x);
        })
        .join()
        .expect("worker");
        let after = process_cpu_s();
        assert!(after - before >= 0.02, "{before} -> {after}");
    }
}
