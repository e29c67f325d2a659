//! A topic's log settings: its explicit configs (Kafka names) over the broker's defaults.

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
    }
    c
}
