//! The leader-epoch cache: which leader epoch wrote which range of offsets.
//!
//! Owns the list of (epoch, first offset written in that epoch), strictly increasing in both, and
//! its text form for `leader-epoch-checkpoint` (Kafka's: a version line, a count line, then
//! `epoch start_offset` lines). Replication uses [`LeaderEpochCache::end_offset_for`] to answer a
//! follower's "where did my last epoch end?" so the follower can truncate past it. Pure: the log
//! persists it.

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<(i32, u64)>,
}

impl LeaderEpochCache {
    pub fn entries(&self) -> &[(i32, u64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// Records that `epoch` writes from `start_offset`. Returns whether the cache changed (and so
    /// must be persisted). An older epoch than the latest is ignored: offsets only move forward
    /// under a newer leader.
    pub fn assign(&mut self, epoch: i32, start_offset: u64) -> bool {
        if epoch < 0 {
            return false;
        }
        match self.entries.last() {
            Some(&(e, _)) if epoch <= e => false,
            _ => {
                // A newer epoch starting at or before an existing entry's offset supersedes it.
                self.entries.retain(|&(_, s)| s < start_offset);
                self.entries.push((epoch, start_offset));
                true
            }
        }
    }

    /// After the log is truncated to `log_end_offset`, forget epochs that started at or after it.
    pub fn truncate_from_end(&mut self, log_end_offset: u64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|&(_, s)| s < log_end_offset);
        before != self.entries.len()
    }

    /// After records below `log_start_offset` are deleted, the first surviving entry starts there.
    pub fn truncate_from_start(&mut self, log_start_offset: u64) -> bool {
        let keep_from = self
            .entries
            .partition_point(|&(_, s)| s <= log_start_offset);
        if keep_from <= 1 {
            if let Some(first) = self.entries.first_mut() {
                if keep_from == 1 && first.1 < log_start_offset {
                    first.1 = log_start_offset;
                    return true;
                }
            }
            return false;
        }
        self.entries.drain(..keep_from - 1);
        self.entries[0].1 = log_start_offset;
        true
    }

    /// Kafka's OffsetsForLeaderEpoch: the largest epoch `<= requested` and the offset where it
    /// ended (the next epoch's start, or `log_end_offset` for the latest). `None` when the log
    /// holds no epoch at or below `requested`.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: u64) -> Option<(i32, u64)> {
        let idx = self.entries.partition_point(|&(e, _)| e <= requested);
        if idx == 0 {
            return None;
        }
        let epoch = self.entries[idx - 1].0;
        let end = self.entries.get(idx).map_or(log_end_offset, |&(_, s)| s);
        Some((epoch, end))
    }

    pub fn encode(&self) -> String {
        let mut s = format!("0\n{}\n", self.entries.len());
        for (e, o) in &self.entries {
            s.push_str(&format!("{e} {o}\n"));
        }
        s
    }

    pub fn decode(text: &str) -> Result<Self, String> {
        let mut lines = text.lines();
        if lines.next() != Some("0") {
            return Err("leader-epoch-checkpoint: unknown version".into());
        }
        let count: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or("leader-epoch-checkpoint: bad count line")?;
        let mut cache = Self::default();
        for line in lines.by_ref().take(count) {
            let mut parts = line.split_whitespace();
            let epoch: i32 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or("bad epoch")?;
            let start: u64 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or("bad offset")?;
            if let Some(&(e, s)) = cache.entries.last() {
                if epoch <= e || start < s {
                    return Err(format!(
                        "leader-epoch-checkpoint: entries out of order at {line:?}"
                    ));
                }
            }
            cache.entries.push((epoch, start));
        }
        if cache.entries.len() != count {
            return Err("leader-epoch-checkpoint: fewer entries than its count".into());
        }
        Ok(cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_answer_where_they_ended() {
        let mut c = LeaderEpochCache::default();
        assert!(c.assign(1, 0));
        assert!(!c.assign(1, 10));
        assert!(c.assign(3, 10));
        assert!(!c.assign(2, 20), "an older epoch never overrides");
        assert_eq!(c.end_offset_for(1, 30), Some((1, 10)));
        assert_eq!(c.end_offset_for(2, 30), Some((1, 10)));
        assert_eq!(c.end_offset_for(3, 30), Some((3, 30)));
        assert_eq!(c.end_offset_for(0, 30), None);
        assert!(c.truncate_from_end(10));
        assert_eq!(c.entries(), &[(1, 0)]);
        assert_eq!(LeaderEpochCache::decode(&c.encode()), Ok(c));
    }

    #[test]
    fn start_truncation_keeps_the_epoch_covering_the_new_start() {
        let mut c = LeaderEpochCache::default();
        c.assign(1, 0);
        c.assign(2, 10);
        c.assign(4, 20);
        assert!(c.truncate_from_start(15));
        assert_eq!(c.entries(), &[(2, 15), (4, 20)]);
        assert!(LeaderEpochCache::decode("0\n2\n1 0\n").is_err());
        assert!(LeaderEpochCache::decode("0\n2\n2 5\n1 9\n").is_err());
    }
}
