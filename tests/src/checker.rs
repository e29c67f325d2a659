//! The checker: what the broker acknowledged against what a consumer reads back.
//!
//! An [`Acked`] is a record the broker said it has — partition and offset from its answer, value
//! from the test. The checks: every acknowledged record is read back at its offset with its value
//! ([`missing_acked`]); nothing is read twice ([`duplicates`]); within a partition, records come
//! back in the order they were sent ([`out_of_order`]). Each returns the violations it found, so
//! a failing test prints all of them, not just the first.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use spool_protocol::client::ConsumerRecord;

/// A record the broker acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acked {
    pub partition: i32,
    pub offset: i64,
    pub value: Bytes,
}

/// Acknowledged records that were not read back at their offset with their value.
pub fn missing_acked(acked: &[Acked], read: &[ConsumerRecord]) -> Vec<String> {
    let at: HashMap<(i32, i64), &ConsumerRecord> =
        read.iter().map(|r| ((r.partition, r.offset), r)).collect();
    acked
        .iter()
        .filter_map(|a| match at.get(&(a.partition, a.offset)) {
            None => Some(format!(
                "partition {} offset {}: acknowledged {:?}, not read back",
                a.partition, a.offset, a.value
            )),
            Some(r) if r.value.as_ref() != Some(&a.value) => Some(format!(
                "partition {} offset {}: acknowledged {:?}, read {:?}",
                a.partition, a.offset, a.value, r.value
            )),
            Some(_) => None,
        })
        .collect()
}

/// Offsets and values read more than once.
pub fn duplicates(read: &[ConsumerRecord]) -> Vec<String> {
    let mut offsets = HashSet::new();
    let mut values = HashSet::new();
    let mut out = Vec::new();
    for r in read {
        if !offsets.insert((r.partition, r.offset)) {
            out.push(format!(
                "partition {} offset {} read twice",
                r.partition, r.offset
            ));
        }
        if let Some(v) = &r.value {
            if !values.insert(v.clone()) {
                out.push(format!("value {v:?} read twice"));
            }
        }
    }
    out
}

/// Per partition, sent-order positions (`seq_of(value)`) that go backwards along the offsets, and
/// offsets the consumer returned out of order.
pub fn out_of_order(read: &[ConsumerRecord], seq_of: impl Fn(&Bytes) -> u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut by_partition: BTreeMap<i32, Vec<&ConsumerRecord>> = BTreeMap::new();
    for r in read {
        by_partition.entry(r.partition).or_default().push(r);
    }
    for (p, records) in by_partition {
        for w in records.windows(2) {
            if w[1].offset <= w[0].offset {
                out.push(format!(
                    "partition {p}: offset {} returned after {}",
                    w[1].offset, w[0].offset
                ));
            }
            let (Some(a), Some(b)) = (&w[0].value, &w[1].value) else {
                continue;
            };
            if seq_of(b) <= seq_of(a) {
                out.push(format!(
                    "partition {p}: {b:?} (offset {}) stored after {a:?} (offset {})",
                    w[1].offset, w[0].offset
                ));
            }
        }
    }
    out
}

/// Panics listing `violations` (at most 20 shown) when there are any.
pub fn assert_none(what: &str, violations: &[String]) {
    if violations.is_empty() {
        return;
    }
    let shown: Vec<&str> = violations.iter().take(20).map(String::as_str).collect();
    panic!(
        "{what}: {} violation(s), first ones:\n  {}",
        violations.len(),
        shown.join("\n  ")
    );
}

/// Highest acknowledged offset per partition.
pub fn last_acked_offsets(acked: &[Acked]) -> BTreeMap<i32, i64> {
    let mut out = BTreeMap::new();
    for a in acked {
        let e = out.entry(a.partition).or_insert(a.offset);
        *e = (*e).max(a.offset);
    }
    out
}

/// Whether `read` reaches every offset in `last` (per partition).
pub fn reached(read: &[ConsumerRecord], last: &BTreeMap<i32, i64>) -> bool {
    let mut seen: BTreeMap<i32, i64> = BTreeMap::new();
    for r in read {
        let e = seen.entry(r.partition).or_insert(r.offset);
        *e = (*e).max(r.offset);
    }
    last.iter()
        .all(|(p, o)| seen.get(p).is_some_and(|s| s >= o))
}
