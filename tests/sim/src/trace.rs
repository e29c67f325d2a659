//! [`Trace`]: what happened in a run, as readable lines and as one hash.
//!
//! Owns: the FNV-1a hash over every traced event (its time and text), the last lines kept for a
//! violation report, and — when replaying one seed verbosely — printing every line as it comes.
//! Promises: the hash depends only on the sequence of `(time, text)` recorded, so two runs of one
//! seed give equal hashes exactly when they did the same things in the same order.
//! Never does: decide what to trace (the world and the nodes do).

use std::collections::VecDeque;

/// Lines kept for a violation report when not printing everything.
pub const TAIL_LINES_MAX: usize = 60;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over `bytes`, continuing from `hash`.
pub fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// FNV-1a of `bytes` from the standard offset.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}

pub struct Trace {
    hash: u64,
    events: u64,
    verbose: bool,
    tail: VecDeque<String>,
}

impl Trace {
    pub fn new(verbose: bool) -> Self {
        Trace {
            hash: FNV_OFFSET,
            events: 0,
            verbose,
            tail: VecDeque::with_capacity(TAIL_LINES_MAX),
        }
    }

    pub fn record(&mut self, now_ms: u64, text: &str) {
        self.hash = fnv1a(self.hash, &now_ms.to_le_bytes());
        self.hash = fnv1a(self.hash, text.as_bytes());
        self.events += 1;
        let line = format!("{:>6}.{:03}s {text}", now_ms / 1000, now_ms % 1000);
        if self.verbose {
            println!("{line}");
        }
        if self.tail.len() == TAIL_LINES_MAX {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// The last [`TAIL_LINES_MAX`] lines, oldest first.
    pub fn tail(&self) -> impl Iterator<Item = &str> {
        self.tail.iter().map(String::as_str)
    }
}
