//! What one client executor accumulates during a run (totals, acknowledged sequences, the
//! verifier of its consumers, errors) and hands back when its thread joins.

use crate::stats::Totals;
use crate::verify::{AckLog, Verifier};

/// Errors kept per executor; later ones are only counted.
const ERRORS_KEPT: usize = 20;

pub struct CoreState {
    pub totals: Totals,
    pub acks: AckLog,
    pub verifier: Verifier,
    pub errors: Vec<String>,
    pub errors_dropped: u64,
}

impl CoreState {
    pub fn new(run_id: u32) -> Self {
        Self {
            totals: Totals::default(),
            acks: AckLog::default(),
            verifier: Verifier::new(run_id),
            errors: Vec::new(),
            errors_dropped: 0,
        }
    }

    pub fn error(&mut self, e: String) {
        if self.errors.len() < ERRORS_KEPT {
            self.errors.push(e);
        } else {
            self.errors_dropped += 1;
        }
    }
}
