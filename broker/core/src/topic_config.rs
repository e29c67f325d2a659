//! Topic configuration, typed (DESIGN §5, §7): the Kafka names spool accepts, their legal values,
//! their defaults, and [`TopicConfig`] — what a topic set explicitly, parsed once when the
//! metadata image applies the record that carries it.
//!
//! Owns: the table of known keys and the check of one value ([`check_topic_config`], which the
//! controller runs before anything enters the raft log, so every stored value parses); the typed
//! [`TopicConfig`]; the defaults ([`TopicDefaults`], Kafka's unless the broker's flags say
//! otherwise) and [`TopicConfig::resolve`], which lays one over the other. Nothing on the data path
//! parses a config string: it reads a [`ResolvedTopicConfig`] field.
//! Never does: I/O, or decide what a config means for the storage layer (the broker maps a
//! [`ResolvedTopicConfig`] to the log's settings).

/// What a config value must be.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A 64-bit integer in `[min, max]`.
    Long { min: i64, max: i64 },
    /// One of the listed words.
    OneOf(&'static [&'static str]),
    /// A comma-separated, non-empty list of `delete` / `compact`, each at most once.
    CleanupPolicy,
    /// `true` or `false`.
    Bool,
}

const INT_MAX: i64 = i32::MAX as i64;

/// Kafka's topic config names spool understands, with their legal values.
const KNOWN: &[(&str, Kind)] = &[
    // -1: no time limit.
    (
        "retention.ms",
        Kind::Long {
            min: -1,
            max: i64::MAX,
        },
    ),
    // -1: no size limit.
    (
        "retention.bytes",
        Kind::Long {
            min: -1,
            max: i64::MAX,
        },
    ),
    // The storage layer's segment floor is one 4 KiB block; Kafka's type is int.
    (
        "segment.bytes",
        Kind::Long {
            min: 4096,
            max: INT_MAX,
        },
    ),
    (
        "segment.ms",
        Kind::Long {
            min: 1,
            max: i64::MAX,
        },
    ),
    ("cleanup.policy", Kind::CleanupPolicy),
    (
        "max.message.bytes",
        Kind::Long {
            min: 0,
            max: INT_MAX,
        },
    ),
    (
        "min.insync.replicas",
        Kind::Long {
            min: 1,
            max: INT_MAX,
        },
    ),
    (
        "delete.retention.ms",
        Kind::Long {
            min: 0,
            max: i64::MAX,
        },
    ),
    // A broker config in Kafka; per topic here too (the replication issue asks for both), so a
    // latency-critical topic can drop a slow follower sooner than the broker's default.
    (
        "replica.lag.time.max.ms",
        Kind::Long {
            min: 1,
            max: i64::MAX,
        },
    ),
    (
        "min.compaction.lag.ms",
        Kind::Long {
            min: 0,
            max: i64::MAX,
        },
    ),
    // -2: follow retention.ms / retention.bytes.
    (
        "local.retention.ms",
        Kind::Long {
            min: -2,
            max: i64::MAX,
        },
    ),
    (
        "local.retention.bytes",
        Kind::Long {
            min: -2,
            max: i64::MAX,
        },
    ),
    (
        "compression.type",
        Kind::OneOf(&["producer", "uncompressed", "zstd", "lz4", "snappy", "gzip"]),
    ),
    (
        "message.timestamp.type",
        Kind::OneOf(&["CreateTime", "LogAppendTime"]),
    ),
    ("unclean.leader.election.enable", Kind::Bool),
];

/// The keys [`check_topic_config`] accepts.
pub fn known_topic_config_keys() -> impl Iterator<Item = &'static str> {
    KNOWN.iter().map(|(k, _)| *k)
}

/// Checks one `key = value`. `Err` carries a human message naming the key.
pub fn check_topic_config(key: &str, value: Option<&str>) -> Result<(), String> {
    let Some((_, kind)) = KNOWN.iter().find(|(k, _)| *k == key) else {
        return Err(format!("unknown topic config {key:?}"));
    };
    let Some(value) = value else {
        return Err(format!("topic config {key:?} has no value"));
    };
    match *kind {
        Kind::Long { min, max } => match value.trim().parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) && value.trim() == value => Ok(()),
            Ok(v) => Err(format!("topic config {key}={v} is outside [{min}, {max}]")),
            Err(_) => Err(format!("topic config {key}={value:?} is not an integer")),
        },
        Kind::OneOf(words) => {
            if words.contains(&value) {
                Ok(())
            } else {
                Err(format!(
                    "topic config {key}={value:?} is not one of {words:?}"
                ))
            }
        }
        Kind::CleanupPolicy => {
            let items: Vec<&str> = value.split(',').map(str::trim).collect();
            let each_known = items.iter().all(|i| *i == "delete" || *i == "compact");
            let distinct = items.len() <= 1 || items[0] != items[1];
            if !value.is_empty() && items.len() <= 2 && each_known && distinct {
                Ok(())
            } else {
                Err(format!(
                    "topic config cleanup.policy={value:?} must be delete, compact or delete,compact"
                ))
            }
        }
        Kind::Bool => match value {
            "true" | "false" => Ok(()),
            _ => Err(format!("topic config {key}={value:?} is not true or false")),
        },
    }
}

/// `min.insync.replicas` when neither the topic nor the broker sets it (DESIGN §1: 2).
pub const MIN_INSYNC_REPLICAS_DEFAULT: u32 = 2;
/// `replica.lag.time.max.ms`: a follower that has not caught up for this long leaves the ISR.
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: u64 = 30_000;
/// `delete.retention.ms`: how long a tombstone outlives compaction (24 h).
pub const DELETE_RETENTION_MS_DEFAULT: i64 = 86_400_000;
/// Kafka's `message.max.bytes` default: 1 MiB plus the batch overhead.
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;
/// `segment.bytes` default (1 GiB).
pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
/// `retention.ms` default (7 days).
pub const RETENTION_MS_DEFAULT: i64 = 604_800_000;
/// The smallest segment the storage layer accepts: one 4 KiB block.
pub const SEGMENT_BYTES_MIN: u64 = 4096;
/// The smallest batch a log accepts: one RecordBatch v2 header.
pub const MAX_MESSAGE_BYTES_MIN: usize = 61;

/// Which clean-up a topic's closed segments get (`cleanup.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Whole segments are deleted by age and size.
    pub delete: bool,
    /// Segments are compacted to the newest record per key.
    pub compact: bool,
}

impl CleanupPolicy {
    pub const DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: false,
    };
    pub const COMPACT: CleanupPolicy = CleanupPolicy {
        delete: false,
        compact: true,
    };

    fn parse(value: &str) -> Option<CleanupPolicy> {
        let mut p = CleanupPolicy {
            delete: false,
            compact: false,
        };
        for item in value.split(',').map(str::trim) {
            match item {
                "delete" => p.delete = true,
                "compact" => p.compact = true,
                _ => return None,
            }
        }
        (p.delete || p.compact).then_some(p)
    }
}

/// The broker-wide defaults a topic's explicit settings are laid over (`spool serve`'s flags).
/// `Default` is Kafka's (and DESIGN's) defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDefaults {
    pub segment_bytes: u64,
    /// `None`: no time limit.
    pub retention_ms: Option<i64>,
    pub max_message_bytes: usize,
    pub min_insync_replicas: u32,
    pub replica_lag_time_max_ms: u64,
    pub delete_retention_ms: i64,
    pub unclean_leader_election_enable: bool,
}

impl Default for TopicDefaults {
    fn default() -> Self {
        TopicDefaults {
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            retention_ms: Some(RETENTION_MS_DEFAULT),
            max_message_bytes: MAX_MESSAGE_BYTES_DEFAULT,
            min_insync_replicas: MIN_INSYNC_REPLICAS_DEFAULT,
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            delete_retention_ms: DELETE_RETENTION_MS_DEFAULT,
            unclean_leader_election_enable: false,
        }
    }
}

/// What a topic set explicitly, typed. Built once, when the metadata image applies the record
/// (values were checked by [`check_topic_config`] before they were committed); `None` = not set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfig {
    pub retention_ms: Option<i64>,
    pub retention_bytes: Option<i64>,
    pub segment_bytes: Option<u64>,
    pub segment_ms: Option<i64>,
    pub cleanup_policy: Option<CleanupPolicy>,
    pub max_message_bytes: Option<usize>,
    pub min_insync_replicas: Option<u32>,
    pub delete_retention_ms: Option<i64>,
    pub replica_lag_time_max_ms: Option<u64>,
    pub unclean_leader_election_enable: Option<bool>,
    /// Keys that were set but that this build could not parse (an image made by hand or by a
    /// newer version): kept so that a status page can show them; they change nothing.
    pub unparsed: Vec<String>,
}

impl TopicConfig {
    /// Parses a topic's explicit `key = value` pairs (Kafka names).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> TopicConfig {
        let mut c = TopicConfig::default();
        for (key, value) in pairs {
            let long = || value.parse::<i64>().ok();
            let parsed = match key {
                "retention.ms" => long().map(|v| c.retention_ms = Some(v)),
                "retention.bytes" => long().map(|v| c.retention_bytes = Some(v)),
                "segment.bytes" => long()
                    .and_then(|v| u64::try_from(v).ok())
                    .map(|v| c.segment_bytes = Some(v)),
                "segment.ms" => long().map(|v| c.segment_ms = Some(v)),
                "cleanup.policy" => CleanupPolicy::parse(value).map(|p| c.cleanup_policy = Some(p)),
                "max.message.bytes" => long()
                    .and_then(|v| usize::try_from(v).ok())
                    .map(|v| c.max_message_bytes = Some(v)),
                "min.insync.replicas" => long()
                    .and_then(|v| u32::try_from(v).ok())
                    .map(|v| c.min_insync_replicas = Some(v)),
                "delete.retention.ms" => long().map(|v| c.delete_retention_ms = Some(v)),
                "replica.lag.time.max.ms" => long()
                    .and_then(|v| u64::try_from(v).ok())
                    .filter(|v| *v > 0)
                    .map(|v| c.replica_lag_time_max_ms = Some(v)),
                "unclean.leader.election.enable" => value
                    .parse::<bool>()
                    .ok()
                    .map(|v| c.unclean_leader_election_enable = Some(v)),
                // Known keys spool accepts and stores but does not act on yet.
                k if KNOWN.iter().any(|(known, _)| *known == k) => {
                    check_topic_config(k, Some(value)).ok()
                }
                _ => None,
            };
            if parsed.is_none() {
                c.unparsed.push(key.to_string());
            }
        }
        c
    }

    /// Lays this topic's settings over `defaults`, with Kafka's rules: a negative retention is
    /// "no limit", and `cleanup.policy=compact` without `delete` deletes nothing by age or size
    /// (so a compacted topic such as `__consumer_offsets` keeps its newest record per key).
    pub fn resolve(&self, defaults: &TopicDefaults) -> ResolvedTopicConfig {
        let cleanup_policy = self.cleanup_policy.unwrap_or(CleanupPolicy::DELETE);
        let mut retention_ms = match self.retention_ms {
            Some(v) => (v >= 0).then_some(v),
            None => defaults.retention_ms,
        };
        let mut retention_bytes = self.retention_bytes.and_then(|v| u64::try_from(v).ok());
        if !cleanup_policy.delete {
            retention_ms = None;
            retention_bytes = None;
        }
        ResolvedTopicConfig {
            segment_bytes: self
                .segment_bytes
                .unwrap_or(defaults.segment_bytes)
                .clamp(SEGMENT_BYTES_MIN, u64::from(u32::MAX)),
            segment_ms: self.segment_ms.filter(|v| *v > 0),
            retention_ms,
            retention_bytes,
            cleanup_policy,
            max_message_bytes: self
                .max_message_bytes
                .unwrap_or(defaults.max_message_bytes)
                .max(MAX_MESSAGE_BYTES_MIN),
            min_insync_replicas: self
                .min_insync_replicas
                .unwrap_or(defaults.min_insync_replicas)
                .max(1),
            replica_lag_time_max_ms: self
                .replica_lag_time_max_ms
                .unwrap_or(defaults.replica_lag_time_max_ms),
            delete_retention_ms: self
                .delete_retention_ms
                .unwrap_or(defaults.delete_retention_ms)
                .max(0),
            unclean_leader_election_enable: self
                .unclean_leader_election_enable
                .unwrap_or(defaults.unclean_leader_election_enable),
        }
    }
}

/// A topic's effective settings: its explicit ones over the broker's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTopicConfig {
    pub segment_bytes: u64,
    /// `None`: segments roll by size only.
    pub segment_ms: Option<i64>,
    /// `None`: no time limit.
    pub retention_ms: Option<i64>,
    /// `None`: no size limit.
    pub retention_bytes: Option<u64>,
    pub cleanup_policy: CleanupPolicy,
    pub max_message_bytes: usize,
    /// At least 1.
    pub min_insync_replicas: u32,
    pub replica_lag_time_max_ms: u64,
    pub delete_retention_ms: i64,
    pub unclean_leader_election_enable: bool,
}

impl ResolvedTopicConfig {
    /// The ISR size acks=all needs on a partition of `replicas` replicas: `min.insync.replicas`,
    /// capped by the replication factor, so a topic of one replica accepts acks=all from its
    /// leader alone (the single-node case).
    pub fn required_isr(&self, replicas: usize) -> usize {
        (self.min_insync_replicas as usize).min(replicas.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_values() {
        for (k, v) in [
            ("retention.ms", "-1"),
            ("retention.ms", "604800000"),
            ("retention.bytes", "1073741824"),
            ("segment.bytes", "1048576"),
            ("cleanup.policy", "delete"),
            ("cleanup.policy", "compact"),
            ("cleanup.policy", "delete,compact"),
            ("cleanup.policy", "compact,delete"),
            ("max.message.bytes", "1048588"),
            ("min.insync.replicas", "2"),
            ("compression.type", "zstd"),
        ] {
            assert_eq!(check_topic_config(k, Some(v)), Ok(()), "{k}={v}");
        }
    }

    #[test]
    fn refuses_bad_values() {
        for (k, v) in [
            ("retention.ms", Some("-2")),
            ("retention.ms", Some("soon")),
            ("retention.ms", Some(" 5")),
            ("segment.bytes", Some("100")),
            ("segment.bytes", Some("4294967296")),
            ("cleanup.policy", Some("")),
            ("cleanup.policy", Some("deleted")),
            ("cleanup.policy", Some("delete,delete")),
            ("cleanup.policy", Some("delete,compact,delete")),
            ("min.insync.replicas", Some("0")),
            ("max.message.bytes", Some("-1")),
            ("no.such.key", Some("1")),
            ("retention.ms", None),
        ] {
            assert!(check_topic_config(k, v).is_err(), "{k}={v:?}");
        }
    }

    #[test]
    fn every_accepted_value_parses_into_the_typed_config() {
        for (k, v) in [
            ("retention.ms", "-1"),
            ("retention.bytes", "1073741824"),
            ("segment.bytes", "1048576"),
            ("segment.ms", "1000"),
            ("cleanup.policy", "compact,delete"),
            ("max.message.bytes", "1048588"),
            ("min.insync.replicas", "3"),
            ("delete.retention.ms", "5"),
            ("unclean.leader.election.enable", "true"),
            ("compression.type", "zstd"),
            ("min.compaction.lag.ms", "0"),
        ] {
            assert_eq!(check_topic_config(k, Some(v)), Ok(()), "{k}={v}");
            let c = TopicConfig::from_pairs([(k, v)]);
            assert!(c.unparsed.is_empty(), "{k}={v}: {c:?}");
        }
        let c = TopicConfig::from_pairs([("min.insync.replicas", "3"), ("bogus", "1")]);
        assert_eq!(c.min_insync_replicas, Some(3));
        assert_eq!(c.unparsed, vec!["bogus".to_string()]);
    }

    #[test]
    fn resolve_lays_the_topic_over_the_defaults() {
        let d = TopicDefaults::default();
        let r = TopicConfig::default().resolve(&d);
        assert_eq!(r.min_insync_replicas, MIN_INSYNC_REPLICAS_DEFAULT);
        assert_eq!(r.retention_ms, Some(RETENTION_MS_DEFAULT));
        assert_eq!(r.cleanup_policy, CleanupPolicy::DELETE);
        assert_eq!(
            r.required_isr(1),
            1,
            "one replica: acks=all from the leader alone"
        );
        assert_eq!(r.required_isr(3), 2);
        let r = TopicConfig::from_pairs([("retention.ms", "-1"), ("min.insync.replicas", "3")])
            .resolve(&d);
        assert_eq!((r.retention_ms, r.required_isr(3)), (None, 3));
    }

    #[test]
    fn compact_alone_keeps_everything_compact_delete_keeps_retention() {
        let d = TopicDefaults::default();
        let c = TopicConfig::from_pairs([("cleanup.policy", "compact"), ("retention.ms", "1000")])
            .resolve(&d);
        assert_eq!(c.cleanup_policy, CleanupPolicy::COMPACT);
        assert_eq!((c.retention_ms, c.retention_bytes), (None, None));
        let c = TopicConfig::from_pairs([
            ("cleanup.policy", "compact,delete"),
            ("retention.ms", "1000"),
        ])
        .resolve(&d);
        assert!(c.cleanup_policy.compact && c.cleanup_policy.delete);
        assert_eq!(c.retention_ms, Some(1000));
    }
}
