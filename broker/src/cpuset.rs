//! Linux CPU lists (`0-3,8,10-11`: the format of `taskset -c`, cgroup `cpuset.cpus` and
//! `Cpus_allowed_list` in `/proc/PID/status`) and the choice of CPUs a process pins its executors
//! to, within the set the process may run on (its `sched_getaffinity` mask).
//!
//! Promises: [`parse`] accepts exactly comma-separated CPU ids and ascending `a-b` ranges, and
//! names the piece it rejects; a list is a set (ascending, duplicates merged), and [`format`]
//! prints it back in the shortest form, which [`parse`] reads to the same set. [`choose`] never
//! returns a CPU outside the allowed set, nor an empty list.
//!
//! Shared by the broker (`spool serve --cpuset`) and spool-loadgen (`--cpuset`), which includes
//! this file by path (`#[path]`): it depends on std and libc only, so neither crate depends on
//! the other and the wire-protocol crate does not grow a concern that is not its own.

use std::fmt;
use std::str::FromStr;

/// CPU ids must be below this: the size of libc's `cpu_set_t`, what `sched_getaffinity` and
/// `sched_setaffinity` can express (also bounds the set a list can name).
pub const CPU_ID_LIMIT: usize = libc::CPU_SETSIZE as usize;

/// Why a CPU list or a pinning request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSetError {
    /// Nothing listed (`""`, `","`).
    Empty,
    /// A piece that is not a CPU id or an `a-b` range (`x`, `1-`, `0-3:2`).
    BadPiece(String),
    /// A range whose end comes before its start (`3-1`).
    Backwards { first: usize, last: usize },
    /// A CPU id at or above [`CPU_ID_LIMIT`].
    TooLarge(usize),
    /// A listed CPU this process may not run on; `allowed` is the allowed set, printed.
    NotAllowed { cpu: usize, allowed: String },
    /// `--cores N` asked for more executors than the set has CPUs (or for none).
    WrongCount { cores: usize, cpus: usize },
    /// The affinity mask could not be read or set.
    Affinity(String),
}

impl fmt::Display for CpuSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the CPU list is empty"),
            Self::BadPiece(p) => write!(
                f,
                "`{p}` is neither a CPU number nor a range like 0-3 (expected e.g. 0-3,8,10-11)"
            ),
            Self::Backwards { first, last } => {
                write!(f, "range {first}-{last} runs backwards (write {last}-{first})")
            }
            Self::TooLarge(cpu) => write!(
                f,
                "CPU {cpu} is beyond the largest supported id {}",
                CPU_ID_LIMIT - 1
            ),
            Self::NotAllowed { cpu, allowed } => write!(
                f,
                "CPU {cpu} is not in this process's allowed CPUs ({allowed}, from sched_getaffinity)"
            ),
            Self::WrongCount { cores, cpus } => write!(
                f,
                "--cores {cores} must be between 1 and the {cpus} CPUs of the set"
            ),
            Self::Affinity(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CpuSetError {}

/// A parsed CPU list (a flag's value: clap parses it with [`parse`], so a bad list fails at the
/// command line naming the flag), held as a boxed membership map like libc's `cpu_set_t`: one
/// pointer wide, so the broker's `Command` enum keeps `serve`'s arguments within clippy's
/// variant-size bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(Box<[bool; CPU_ID_LIMIT]>);

impl CpuList {
    /// The set, ascending, never empty.
    pub fn cpus(&self) -> Vec<usize> {
        (0..CPU_ID_LIMIT).filter(|&c| self.0[c]).collect()
    }
}

impl FromStr for CpuList {
    type Err = CpuSetError;
    fn from_str(list: &str) -> Result<Self, CpuSetError> {
        let mut member = Box::new([false; CPU_ID_LIMIT]);
        for c in parse(list)? {
            member[c] = true;
        }
        Ok(Self(member))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format(&self.cpus()))
    }
}

fn cpu_id(piece: &str, text: &str) -> Result<usize, CpuSetError> {
    // `usize::from_str` takes a leading `+`; a CPU list does not.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuSetError::BadPiece(piece.to_string()));
    }
    match text.parse::<usize>() {
        Ok(cpu) if cpu < CPU_ID_LIMIT => Ok(cpu),
        Ok(cpu) => Err(CpuSetError::TooLarge(cpu)),
        // Only digits, so it overflowed: certainly too large.
        Err(_) => Err(CpuSetError::TooLarge(usize::MAX)),
    }
}

/// Parses a CPU list into its set: ascending, without duplicates. Spaces around pieces are
/// allowed; Linux's `:stride` form is not.
pub fn parse(list: &str) -> Result<Vec<usize>, CpuSetError> {
    let mut member = vec![false; CPU_ID_LIMIT];
    let mut any = false;
    for piece in list.split(',').map(str::trim) {
        if piece.is_empty() {
            continue;
        }
        let (first, last) = match piece.split_once('-') {
            Some((a, b)) => (cpu_id(piece, a.trim())?, cpu_id(piece, b.trim())?),
            None => {
                let c = cpu_id(piece, piece)?;
                (c, c)
            }
        };
        if last < first {
            return Err(CpuSetError::Backwards { first, last });
        }
        member[first..=last].iter_mut().for_each(|m| *m = true);
        any = true;
    }
    if !any {
        return Err(CpuSetError::Empty);
    }
    Ok((0..CPU_ID_LIMIT).filter(|&c| member[c]).collect())
}

/// Prints a set (ascending, as [`parse`] returns it) in the shortest list form: `0-3,8,10-11`.
pub fn format(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            out.push_str(&cpus[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", cpus[i], cpus[j]));
        }
        i = j + 1;
    }
    out
}

/// The CPUs to pin executors to, one per executor in ascending order: the listed set (each CPU
/// must be in `allowed`) or, without a list, `allowed` itself; with `cores`, its first `cores`
/// CPUs (more than the set holds is an error, not a silent wrap).
pub fn choose(
    list: Option<&CpuList>,
    cores: Option<usize>,
    allowed: &[usize],
) -> Result<Vec<usize>, CpuSetError> {
    let set = match list {
        Some(list) => {
            let set = list.cpus();
            if let Some(&cpu) = set.iter().find(|c| !allowed.contains(c)) {
                return Err(CpuSetError::NotAllowed {
                    cpu,
                    allowed: format(allowed),
                });
            }
            set
        }
        None => allowed.to_vec(),
    };
    match cores {
        Some(n) if n == 0 || n > set.len() => Err(CpuSetError::WrongCount {
            cores: n,
            cpus: set.len(),
        }),
        Some(n) => Ok(set[..n].to_vec()),
        None if set.is_empty() => Err(CpuSetError::Empty),
        None => Ok(set),
    }
}

/// The CPUs the calling thread may run on (at start-up, the process's affinity mask: what
/// `taskset` or a cgroup left it), ascending.
pub fn allowed() -> Result<Vec<usize>, CpuSetError> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `set`, which lives across the call.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(CpuSetError::Affinity(format!(
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        )));
    }
    let mut cpus = Vec::new();
    for c in 0..CPU_ID_LIMIT {
        // SAFETY: c < CPU_SETSIZE, the set's capacity.
        if unsafe { libc::CPU_ISSET(c, &set) } {
            cpus.push(c);
        }
    }
    Ok(cpus)
}

/// Restricts the calling thread to `cpus`; threads it starts afterwards inherit the mask.
pub fn restrict_current_thread(cpus: &[usize]) -> Result<(), CpuSetError> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < CPU_ID_LIMIT) {
        // SAFETY: c < CPU_SETSIZE, the set's capacity.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: the pointer and size describe `set`, which lives across the call.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        return Err(CpuSetError::Affinity(format!(
            "sched_setaffinity({}): {}",
            format(cpus),
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_ids_and_ranges_into_an_ascending_set() {
        assert_eq!(parse("0-3,8,10-11"), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse("5"), Ok(vec![5]));
        assert_eq!(parse(" 3 , 1,1-2 ,"), Ok(vec![1, 2, 3]));
        assert_eq!(parse("7-7"), Ok(vec![7]));
        assert_eq!(format(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format(&[4, 5]), "4-5");
        let l: CpuList = "8,0-3".parse().expect("list");
        assert_eq!(
            (l.cpus(), l.to_string().as_str()),
            (vec![0, 1, 2, 3, 8], "0-3,8")
        );
        assert_eq!(
            "3-1".parse::<CpuList>(),
            Err(CpuSetError::Backwards { first: 3, last: 1 })
        );
    }

    #[test]
    fn rejects_each_bad_form_naming_it() {
        assert_eq!(
            parse("3-1"),
            Err(CpuSetError::Backwards { first: 3, last: 1 })
        );
        for bad in ["x", "1-", "-1", "0-3:2", "+1", "1-2-3", "0x1", "1 2"] {
            assert_eq!(
                parse(bad),
                Err(CpuSetError::BadPiece(bad.to_string())),
                "{bad}"
            );
        }
        assert_eq!(parse("0,x"), Err(CpuSetError::BadPiece("x".into())));
        assert_eq!(parse(""), Err(CpuSetError::Empty));
        assert_eq!(parse(" , "), Err(CpuSetError::Empty));
        assert_eq!(
            parse(&CPU_ID_LIMIT.to_string()),
            Err(CpuSetError::TooLarge(CPU_ID_LIMIT))
        );
        assert!(matches!(
            parse("99999999999999999999999"),
            Err(CpuSetError::TooLarge(_))
        ));
        let e = parse("3-1").unwrap_err().to_string();
        assert!(e.contains("3-1") && e.contains("backwards"), "{e}");
    }

    #[test]
    fn choose_stays_inside_the_allowed_set() {
        let allowed = [2, 3, 5, 6];
        let list = |s: &str| s.parse::<CpuList>().expect("list");
        // Default: the affinity mask, not 0..n.
        assert_eq!(choose(None, None, &allowed), Ok(vec![2, 3, 5, 6]));
        assert_eq!(choose(None, Some(2), &allowed), Ok(vec![2, 3]));
        assert_eq!(choose(Some(&list("5-6")), None, &allowed), Ok(vec![5, 6]));
        assert_eq!(
            choose(Some(&list("3,5-6")), Some(2), &allowed),
            Ok(vec![3, 5])
        );
        let e = choose(Some(&list("2-4")), None, &allowed).unwrap_err();
        assert_eq!(
            e,
            CpuSetError::NotAllowed {
                cpu: 4,
                allowed: "2-3,5-6".into()
            }
        );
        assert!(e.to_string().contains("CPU 4 is not in"), "{e}");
        assert_eq!(
            choose(Some(&list("5-6")), Some(3), &allowed),
            Err(CpuSetError::WrongCount { cores: 3, cpus: 2 })
        );
        assert_eq!(
            choose(None, Some(0), &allowed),
            Err(CpuSetError::WrongCount { cores: 0, cpus: 4 })
        );
        assert_eq!(choose(None, None, &[]), Err(CpuSetError::Empty));
    }

    #[test]
    fn this_process_may_run_somewhere() {
        let a = allowed().expect("sched_getaffinity");
        assert!(!a.is_empty());
        assert!(a.windows(2).all(|w| w[0] < w[1]));
    }

    proptest! {
        #[test]
        fn a_set_printed_back_parses_to_the_same_set(
            cpus in proptest::collection::btree_set(0..CPU_ID_LIMIT, 1..64)
        ) {
            let cpus: Vec<usize> = cpus.into_iter().collect();
            let text = format(&cpus);
            prop_assert_eq!(parse(&text), Ok(cpus.clone()));
            // The shortest form: no two pieces that could have been one range.
            prop_assert!(text.split(',').count() <= cpus.len());
        }

        #[test]
        fn never_panics_and_any_set_it_returns_is_sound(
            s in "([0-9]{1,5}(-[0-9]{1,5})?,){0,4}[0-9, x:+-]{0,8}"
        ) {
            if let Ok(cpus) = parse(&s) {
                prop_assert!(!cpus.is_empty());
                prop_assert!(cpus.iter().all(|&c| c < CPU_ID_LIMIT));
                prop_assert!(cpus.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
