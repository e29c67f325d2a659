//! A topic's log settings: its explicit configs (Kafka names) over the broker's defaults.
//! `cleanup.policy=compact` without `delete` turns time and size retention off, as in Kafka.

use spool_raft::image::TopicImage;
use spool_storage::{CleanupPolicy, LogConfig};

use crate::config::BrokerConfig;

pub fn log_config_for(broker: &BrokerConfig, topic: &TopicImage) -> LogConfig {
    let mut c = LogConfig {
        segment_bytes: broker.segment_bytes,
        max_batch_bytes: broker.max_message_bytes,
        retention_ms: broker.retention_ms,
        ..LogConfig::default()
    };
    if let Some(v) = topic.config_i64("segment.bytes") {
        c.segment_bytes = (v.max(4096) as u64).min(u64::from(u32::MAX));
    }
    if let Some(v) = topic.config_i64("segment.ms") {
        c.segment_ms = (v > 0).then_some(v);
    }
    if let Some(v) = topic.config_i64("retention.ms") {
        c.retention_ms = (v >= 0).then_some(v);
    }
    if let Some(v) = topic.config_i64("retention.bytes") {
        c.retention_bytes = (v >= 0).then_some(v as u64);
    }
    if let Some(v) = topic.config_i64("max.message.bytes") {
        c.max_batch_bytes = v.max(61) as usize;
    }
    if let Some(v) = topic.config_i64("delete.retention.ms") {
        c.delete_retention_ms = v.max(0);
    }
    if let Some(p) = topic.config("cleanup.policy") {
        c.cleanup_policy = if p.contains("compact") {
            CleanupPolicy::Compact
        } else {
            CleanupPolicy::Delete
        };
        // Kafka: `compact` alone deletes nothing by age or size (only `compact,delete` does), so
        // a compacted topic such as `__consumer_offsets` keeps its newest record per key forever.
        if !p.contains("delete") {
            c.retention_ms = None;
            c.retention_bytes = None;
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_raft::Uuid128;

    fn topic(configs: &[(&str, &str)]) -> TopicImage {
        TopicImage {
            name: "t".into(),
            topic_id: Uuid128::ZERO,
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
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
        assert_eq!(c.retention_ms, b.retention_ms);
    }
}
