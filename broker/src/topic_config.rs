//! A topic's log settings: its typed config (`spool_core::topic_config`, parsed once when the
//! metadata image applied the topic) resolved over the broker's defaults, mapped to what the
//! storage layer takes. The rules (negative retention = no limit, `compact` alone turns time and
//! size retention off, as in Kafka) live in `spool-core`; this file only translates.

use spool_core::topic_config::ResolvedTopicConfig;
use spool_raft::image::TopicImage;
use spool_storage::{CleanupPolicy, LogConfig};

use crate::config::BrokerConfig;

/// `topic`'s effective settings on this broker.
pub fn resolved(broker: &BrokerConfig, topic: &TopicImage) -> ResolvedTopicConfig {
    topic.config.resolve(&broker.topic_defaults)
}

pub fn log_config_for(broker: &BrokerConfig, topic: &TopicImage) -> LogConfig {
    let r = resolved(broker, topic);
    LogConfig {
        segment_bytes: r.segment_bytes,
        segment_ms: r.segment_ms,
        max_batch_bytes: r.max_message_bytes,
        retention_ms: r.retention_ms,
        retention_bytes: r.retention_bytes,
        delete_retention_ms: r.delete_retention_ms,
        cleanup_policy: if r.cleanup_policy.compact {
            CleanupPolicy::Compact
        } else {
            CleanupPolicy::Delete
        },
        prewrite_bytes: broker.log_prewrite_bytes,
        ..LogConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_core::topic_config::TopicConfig;
    use spool_raft::Uuid128;

    fn topic(configs: &[(&str, &str)]) -> TopicImage {
        TopicImage {
            name: "t".into(),
            topic_id: Uuid128::ZERO,
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            config: TopicConfig::from_pairs(configs.iter().copied()),
            partitions: Vec::new(),
        }
    }

    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        serve: crate::config::ServeArgs,
    }

    fn broker() -> BrokerConfig {
        let w = <Wrapper as clap::Parser>::try_parse_from(["spool"]).unwrap();
        BrokerConfig::from_args(&w.serve).unwrap()
    }

    #[test]
    fn compact_alone_keeps_everything_compact_delete_keeps_retention() {
        let b = broker();
        let c = log_config_for(
            &b,
            &topic(&[("cleanup.policy", "compact"), ("retention.ms", "1000")]),
        );
        assert_eq!(c.cleanup_policy, CleanupPolicy::Compact);
        assert_eq!((c.retention_ms, c.retention_bytes), (None, None));
        let c = log_config_for(
            &b,
            &topic(&[
                ("cleanup.policy", "compact,delete"),
                ("retention.ms", "1000"),
            ]),
        );
        assert_eq!(c.cleanup_policy, CleanupPolicy::Compact);
        assert_eq!(c.retention_ms, Some(1000));
        let c = log_config_for(&b, &topic(&[]));
        assert_eq!(c.cleanup_policy, CleanupPolicy::Delete);
        assert_eq!(c.retention_ms, b.topic_defaults.retention_ms);
        assert_eq!(c.max_batch_bytes, b.max_message_bytes);
    }

    #[test]
    fn zeros_ahead_only_where_acks_wait_for_fdatasync() {
        let parse = |args: &[&str]| {
            let w = <Wrapper as clap::Parser>::try_parse_from(args).unwrap();
            BrokerConfig::from_args(&w.serve)
        };
        let c = log_config_for(&parse(&["spool"]).unwrap(), &topic(&[]));
        assert_eq!(c.prewrite_bytes, crate::config::LOG_PREWRITE_BYTES_FSYNC);
        let b = parse(&["spool", "--durability", "replicated"]).unwrap();
        assert_eq!(log_config_for(&b, &topic(&[])).prewrite_bytes, 0);
        let b = parse(&["spool", "--log-prewrite-bytes", "0"]).unwrap();
        assert_eq!(log_config_for(&b, &topic(&[])).prewrite_bytes, 0);
        let err = parse(&["spool", "--log-prewrite-bytes", "1000"]).unwrap_err();
        assert!(err.contains("multiple of 4096"), "{err}");
    }

    #[test]
    fn broker_flags_are_the_topic_defaults() {
        let w = <Wrapper as clap::Parser>::try_parse_from([
            "spool",
            "--segment-bytes",
            "8192",
            "--retention-ms",
            "-1",
        ])
        .unwrap();
        let b = BrokerConfig::from_args(&w.serve).unwrap();
        let c = log_config_for(&b, &topic(&[]));
        assert_eq!((c.segment_bytes, c.retention_ms), (8192, None));
        let c = log_config_for(&b, &topic(&[("segment.bytes", "16384")]));
        assert_eq!(c.segment_bytes, 16384);
    }
}
