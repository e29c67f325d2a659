//! `--verify` bookkeeping: which (producer, sequence) pairs were acknowledged, which arrived, and
//! whether each partition delivered every producer's messages once and in increasing sequence.
//! Producers fill an [`AckLog`]; each consumer fills a [`Verifier`] for its partitions; at the end
//! they merge into a [`VerifyReport`]. Pure: no I/O, no clock.

use std::collections::HashMap;

/// A growable bitmap of sequence numbers (1 bit each: a million messages cost 125 KB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqSet {
    words: Vec<u64>,
    len: u64,
}

impl SeqSet {
    /// Adds `seq`; false when it was already there.
    pub fn insert(&mut self, seq: u64) -> bool {
        let word = (seq / 64) as usize;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let bit = 1u64 << (seq % 64);
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        self.len += u64::from(fresh);
        fresh
    }

    #[cfg(test)]
    pub fn contains(&self, seq: u64) -> bool {
        self.words
            .get((seq / 64) as usize)
            .is_some_and(|w| w & (1u64 << (seq % 64)) != 0)
    }

    /// Members in the set.
    pub fn count(&self) -> u64 {
        self.len
    }

    /// Members of `self` missing from `other`.
    pub fn count_missing_from(&self, other: &SeqSet) -> u64 {
        self.words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let o = other.words.get(i).copied().unwrap_or(0);
                u64::from((w & !o).count_ones())
            })
            .sum()
    }

    /// Adds every member of `other`; returns how many were already here.
    pub fn union_counting_overlap(&mut self, other: &SeqSet) -> u64 {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        let mut overlap = 0;
        for (i, o) in other.words.iter().enumerate() {
            overlap += u64::from((self.words[i] & o).count_ones());
            self.words[i] |= o;
        }
        self.len = self.words.iter().map(|w| u64::from(w.count_ones())).sum();
        overlap
    }
}

/// What the producers know: acknowledged and failed sends, per producer id.
#[derive(Debug, Clone, Default)]
pub struct AckLog {
    pub acked: HashMap<u32, SeqSet>,
    pub failed_sends: u64,
}

impl AckLog {
    pub fn ack(&mut self, producer_id: u32, seq: u64) {
        self.acked.entry(producer_id).or_default().insert(seq);
    }

    pub fn merge(&mut self, other: AckLog) {
        for (p, set) in other.acked {
            self.acked
                .entry(p)
                .or_default()
                .union_counting_overlap(&set);
        }
        self.failed_sends += other.failed_sends;
    }
}

/// What one consumer saw on its partitions.
#[derive(Debug, Clone)]
pub struct Verifier {
    run_id: u32,
    received: HashMap<u32, SeqSet>,
    /// Highest sequence seen per (partition, producer).
    last_seq: HashMap<(i32, u32), u64>,
    pub duplicated: u64,
    pub reordered: u64,
    /// Records from another run or not loadgen payloads at all (ignored).
    pub foreign: u64,
}

impl Verifier {
    pub fn new(run_id: u32) -> Self {
        Self {
            run_id,
            received: HashMap::new(),
            last_seq: HashMap::new(),
            duplicated: 0,
            reordered: 0,
            foreign: 0,
        }
    }

    /// Checks one record: `header` is `None` for a value that did not decode.
    pub fn observe(&mut self, partition: i32, header: Option<crate::payload::Header>) {
        let Some(h) = header.filter(|h| h.run_id == self.run_id) else {
            self.foreign += 1;
            return;
        };
        if !self
            .received
            .entry(h.producer_id)
            .or_default()
            .insert(h.seq)
        {
            self.duplicated += 1;
            return;
        }
        match self.last_seq.get_mut(&(partition, h.producer_id)) {
            Some(last) if h.seq < *last => self.reordered += 1,
            Some(last) => *last = h.seq,
            None => {
                self.last_seq.insert((partition, h.producer_id), h.seq);
            }
        }
    }

    /// Folds another consumer's findings in (a message seen by two consumers is a duplicate).
    pub fn merge(&mut self, other: Verifier) {
        for (p, set) in other.received {
            self.duplicated += self
                .received
                .entry(p)
                .or_default()
                .union_counting_overlap(&set);
        }
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
        self.foreign += other.foreign;
    }

    /// The verdict against what the producers had acknowledged.
    pub fn report(&self, acks: &AckLog) -> VerifyReport {
        let empty = SeqSet::default();
        let lost = acks
            .acked
            .iter()
            .map(|(p, set)| set.count_missing_from(self.received.get(p).unwrap_or(&empty)))
            .sum();
        VerifyReport {
            acked: acks.acked.values().map(SeqSet::count).sum(),
            received_unique: self.received.values().map(SeqSet::count).sum(),
            lost,
            duplicated: self.duplicated,
            reordered: self.reordered,
            failed_sends: acks.failed_sends,
            foreign: self.foreign,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyReport {
    pub acked: u64,
    pub received_unique: u64,
    /// Acknowledged but never received.
    pub lost: u64,
    pub duplicated: u64,
    /// Arrived below a higher sequence of the same producer on the same partition.
    pub reordered: u64,
    /// Sends that completed with an error (not counted as lost: nobody promised them).
    pub failed_sends: u64,
    pub foreign: u64,
}

impl VerifyReport {
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.reordered == 0 && self.failed_sends == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Header;

    fn h(producer_id: u32, seq: u64) -> Option<Header> {
        Some(Header {
            run_id: 1,
            producer_id,
            seq,
            send_time_us: 0,
        })
    }

    #[test]
    fn seqset_counts_inserts_and_differences() {
        let mut a = SeqSet::default();
        assert!(a.insert(0) && a.insert(200) && !a.insert(200));
        assert_eq!(a.count(), 2);
        assert!(a.contains(200) && !a.contains(199) && !a.contains(10_000));
        let mut b = SeqSet::default();
        b.insert(200);
        assert_eq!(a.count_missing_from(&b), 1);
        assert_eq!(b.count_missing_from(&a), 0);
        assert_eq!(b.union_counting_overlap(&a), 1);
        assert_eq!(b.count(), 2);
    }

    #[test]
    fn clean_delivery_passes() {
        let mut acks = AckLog::default();
        let mut v = Verifier::new(1);
        for seq in 0..1000 {
            acks.ack(0, seq);
            acks.ack(1, seq);
            v.observe((seq % 3) as i32, h(0, seq));
            v.observe(7, h(1, seq));
        }
        let r = v.report(&acks);
        assert!(r.passed(), "{r:?}");
        assert_eq!((r.acked, r.received_unique), (2000, 2000));
    }

    #[test]
    fn counts_lost_duplicated_reordered_and_foreign() {
        let mut acks = AckLog::default();
        for seq in 0..10 {
            acks.ack(0, seq);
        }
        let mut v = Verifier::new(1);
        for seq in [0, 1, 3, 2, 4, 4, 5, 6, 7] {
            v.observe(0, h(0, seq));
        }
        v.observe(0, None);
        v.observe(
            0,
            Some(Header {
                run_id: 2,
                producer_id: 0,
                seq: 8,
                send_time_us: 0,
            }),
        );
        let r = v.report(&acks);
        assert_eq!(r.lost, 2); // 8 and 9
        assert_eq!(r.duplicated, 1); // the second 4
        assert_eq!(r.reordered, 1); // 2 after 3
        assert_eq!(r.foreign, 2);
        assert!(!r.passed());
    }

    #[test]
    fn order_is_per_partition_and_merge_finds_cross_consumer_duplicates() {
        let mut a = Verifier::new(1);
        let mut b = Verifier::new(1);
        a.observe(0, h(0, 5));
        b.observe(1, h(0, 1)); // lower seq, other partition: fine
        b.observe(1, h(0, 5)); // same message seen by a: duplicate after merge
        a.merge(b);
        let mut acks = AckLog::default();
        acks.ack(0, 1);
        acks.ack(0, 5);
        let r = a.report(&acks);
        assert_eq!((r.lost, r.duplicated, r.reordered), (0, 1, 0));
    }

    #[test]
    fn failed_sends_fail_the_run_without_counting_as_lost() {
        let acks = AckLog {
            failed_sends: 1,
            ..AckLog::default()
        };
        let r = Verifier::new(1).report(&acks);
        assert_eq!(r.lost, 0);
        assert!(!r.passed());
    }
}
