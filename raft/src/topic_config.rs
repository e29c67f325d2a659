//! Per-topic configs: which Kafka names spool accepts and what values are legal.
//!
//! Owns: the table of known topic config keys and the check of one value. A create request with an
//! unknown key, a missing value, or a value that does not parse or is out of range is refused with
//! `INVALID_CONFIG` (40) and a message naming the key — before anything enters the raft log, so the
//! broker can later parse every stored value without a fallback.
//! Never does: resolve defaults (the broker owns its defaults; the image stores only what was set).

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
}
