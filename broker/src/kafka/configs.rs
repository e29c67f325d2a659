//! DescribeConfigs on the Kafka front: a topic's configs and this broker's, as they act.
//!
//! Promises (issue 17, item 4):
//! - every topic config spool accepts (`spool_core::topic_config::known_topic_config_keys`) is
//!   listed, set or not, with the value the broker acts on — `min.insync.replicas` capped by the
//!   replication factor (what acks=all needs: a one-replica topic takes acks=all from its leader
//!   alone), `segment.ms` unset as `Long.MAX_VALUE` (spool rolls by size only), retention off
//!   under `cleanup.policy=compact` as -1 — and keys spool stores but does not act on yet
//!   (`compression.type`, `message.timestamp.type`, `min.compaction.lag.ms`,
//!   `local.retention.*`) with their written value or Kafka's default;
//! - the source says where the value comes from: the topic (1), a broker flag that differs from
//!   Kafka's default (4), or the default (5);
//! - read-only is false for a topic's configs (AlterConfigs / IncrementalAlterConfigs change
//!   them, `super::topic_admin`) and true for the broker's (start-up flags).

use std::rc::Rc;

use kafka_protocol::messages::DescribeConfigsResponse;
use kafka_protocol::messages::{describe_configs_response, DescribeConfigsRequest};
use spool_core::topic_config::{known_topic_config_keys, TopicDefaults};
use spool_protocol::ErrorCode;
use spool_raft::image::TopicImage;

use super::kstr;
use crate::shard::Shard;

/// DescribeConfigs resource types (Kafka's `ConfigResource.Type`).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// DescribeConfigs config sources (Kafka's `DescribeConfigsResponse.ConfigSource`).
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// Kafka's `Long.MAX_VALUE`: what Kafka clients read as "never" for a time config.
const NEVER_MS: i64 = i64::MAX;

/// One DescribeConfigs entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    pub source: i8,
}

fn entry(name: &str, value: impl ToString, source: i8) -> ConfigEntry {
    ConfigEntry {
        name: name.to_owned(),
        value: value.to_string(),
        source,
    }
}

pub fn describe_configs(shard: &Rc<Shard>, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.as_str().to_owned();
            let keys: Option<Vec<String>> = r
                .configuration_keys
                .map(|k| k.iter().map(|s| s.as_str().to_owned()).collect());
            let read_only = r.resource_type != RESOURCE_TOPIC;
            let entries = match r.resource_type {
                RESOURCE_TOPIC => {
                    let image = shard.image.borrow();
                    image
                        .topic(&name)
                        .map(|t| topic_configs(&shard.config.topic_defaults, t))
                        .ok_or((
                            ErrorCode::UnknownTopicOrPartition,
                            format!("unknown topic {name}"),
                        ))
                }
                RESOURCE_BROKER => broker_configs(shard, &name),
                other => Err((
                    ErrorCode::InvalidRequest,
                    format!("resource type {other} is not described by spool"),
                )),
            };
            let result = describe_configs_response::DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name);
            match entries {
                Ok(entries) => result.with_configs(
                    entries
                        .into_iter()
                        .filter(|e| keys.as_ref().is_none_or(|ks| ks.contains(&e.name)))
                        .map(|e| {
                            describe_configs_response::DescribeConfigsResourceResult::default()
                                .with_name(kstr(e.name))
                                .with_value(Some(kstr(e.value)))
                                .with_read_only(read_only)
                                .with_config_source(e.source)
                        })
                        .collect(),
                ),
                Err((code, message)) => result
                    .with_error_code(code as i16)
                    .with_error_message(Some(kstr(message))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Every topic config spool accepts, in the order `known_topic_config_keys` lists them (module
/// docs).
pub fn topic_configs(defaults: &TopicDefaults, t: &TopicImage) -> Vec<ConfigEntry> {
    let r = t.config.resolve(defaults);
    let kafka = TopicDefaults::default();
    let replicas = t.partitions.first().map_or(1, |p| p.replicas.len());
    // Where an unset value comes from: a broker flag when it differs from Kafka's default.
    let inherited = |differs: bool| {
        if differs {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        }
    };
    known_topic_config_keys()
        .map(|key| {
            let set = t.config_value(key);
            let source = |differs: bool| {
                if set.is_some() {
                    SOURCE_TOPIC
                } else {
                    inherited(differs)
                }
            };
            match key {
                "retention.ms" => entry(
                    key,
                    r.retention_ms.unwrap_or(-1),
                    source(defaults.retention_ms != kafka.retention_ms),
                ),
                "retention.bytes" => entry(
                    key,
                    r.retention_bytes.map_or(-1, |v| v as i64),
                    source(false),
                ),
                "segment.bytes" => entry(
                    key,
                    r.segment_bytes,
                    source(defaults.segment_bytes != kafka.segment_bytes),
                ),
                "segment.ms" => entry(key, r.segment_ms.unwrap_or(NEVER_MS), source(false)),
                "cleanup.policy" => entry(
                    key,
                    match (r.cleanup_policy.delete, r.cleanup_policy.compact) {
                        (true, true) => "compact,delete",
                        (false, true) => "compact",
                        _ => "delete",
                    },
                    source(false),
                ),
                "max.message.bytes" => entry(
                    key,
                    r.max_message_bytes,
                    source(defaults.max_message_bytes != kafka.max_message_bytes),
                ),
                "min.insync.replicas" => entry(
                    key,
                    r.required_isr(replicas),
                    source(defaults.min_insync_replicas != kafka.min_insync_replicas),
                ),
                "delete.retention.ms" => entry(
                    key,
                    r.delete_retention_ms,
                    source(defaults.delete_retention_ms != kafka.delete_retention_ms),
                ),
                "replica.lag.time.max.ms" => entry(
                    key,
                    r.replica_lag_time_max_ms,
                    source(defaults.replica_lag_time_max_ms != kafka.replica_lag_time_max_ms),
                ),
                "unclean.leader.election.enable" => entry(
                    key,
                    r.unclean_leader_election_enable,
                    source(
                        defaults.unclean_leader_election_enable
                            != kafka.unclean_leader_election_enable,
                    ),
                ),
                // Stored, not acted on yet: the written value or Kafka's default.
                other => entry(
                    other,
                    set.unwrap_or_else(|| stored_only_default(other)),
                    source(false),
                ),
            }
        })
        .collect()
}

/// Kafka's default for a key spool accepts and stores but does not act on yet.
fn stored_only_default(key: &str) -> &'static str {
    match key {
        "min.compaction.lag.ms" => "0",
        "local.retention.ms" | "local.retention.bytes" => "-2",
        "compression.type" => "producer",
        "message.timestamp.type" => "CreateTime",
        _ => "",
    }
}

/// This broker's configs (the resource name is a broker id; empty means this broker).
fn broker_configs(shard: &Shard, name: &str) -> Result<Vec<ConfigEntry>, (ErrorCode, String)> {
    let cfg = &shard.config;
    if !name.is_empty() && name != cfg.node_id.to_string() {
        return Err((
            ErrorCode::InvalidRequest,
            format!("broker {name} is not this broker ({})", cfg.node_id),
        ));
    }
    let s = SOURCE_STATIC_BROKER;
    let d = &cfg.topic_defaults;
    Ok(vec![
        entry("broker.id", cfg.node_id, s),
        entry(
            "advertised.listeners",
            format!(
                "PLAINTEXT://{}:{}",
                cfg.advertised_host, cfg.advertised_kafka_port
            ),
            s,
        ),
        entry("auto.create.topics.enable", cfg.auto_create_topics, s),
        entry("num.partitions", cfg.default_partitions, s),
        entry("message.max.bytes", cfg.max_message_bytes, s),
        entry("socket.request.max.bytes", cfg.max_frame_bytes, s),
        entry("log.segment.bytes", cfg.segment_bytes, s),
        entry("log.retention.ms", cfg.retention_ms.unwrap_or(-1), s),
        entry("log.dirs", cfg.data_dir.display(), s),
        entry("min.insync.replicas", d.min_insync_replicas, s),
        entry("replica.lag.time.max.ms", d.replica_lag_time_max_ms, s),
        entry(
            "unclean.leader.election.enable",
            d.unclean_leader_election_enable,
            s,
        ),
        entry("log.cleaner.delete.retention.ms", d.delete_retention_ms, s),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_core::topic_config::TopicConfig;
    use spool_raft::image::PartitionState;
    use spool_raft::Uuid128;

    fn topic(replicas: usize, configs: &[(&str, &str)]) -> TopicImage {
        TopicImage {
            name: "t".into(),
            topic_id: Uuid128::ZERO,
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            config: TopicConfig::from_pairs(configs.iter().copied()),
            partitions: vec![PartitionState {
                replicas: (0..replicas as i32).collect(),
                isr: (0..replicas as i32).collect(),
                eligible_leaders: Vec::new(),
                leader: 0,
                leader_epoch: 0,
                partition_epoch: 0,
            }],
        }
    }

    fn find<'a>(entries: &'a [ConfigEntry], key: &str) -> &'a ConfigEntry {
        entries
            .iter()
            .find(|e| e.name == key)
            .unwrap_or_else(|| panic!("{key} is not listed: {entries:?}"))
    }

    #[test]
    fn every_accepted_key_is_listed_once() {
        let entries = topic_configs(&TopicDefaults::default(), &topic(3, &[]));
        let keys: Vec<&str> = known_topic_config_keys().collect();
        assert_eq!(
            entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            keys
        );
        assert!(entries.iter().all(|e| !e.value.is_empty()), "{entries:?}");
        assert!(
            entries.iter().all(|e| e.source == SOURCE_DEFAULT),
            "{entries:?}"
        );
    }

    #[test]
    fn min_insync_replicas_is_capped_by_the_replication_factor() {
        let d = TopicDefaults::default();
        assert_eq!(
            find(&topic_configs(&d, &topic(1, &[])), "min.insync.replicas").value,
            "1"
        );
        assert_eq!(
            find(&topic_configs(&d, &topic(3, &[])), "min.insync.replicas").value,
            "2"
        );
        let set = topic_configs(&d, &topic(2, &[("min.insync.replicas", "3")]));
        let e = find(&set, "min.insync.replicas");
        assert_eq!((e.value.as_str(), e.source), ("2", SOURCE_TOPIC));
    }

    #[test]
    fn values_are_reported_as_they_act_with_their_source() {
        let d = TopicDefaults {
            retention_ms: Some(3_600_000),
            ..TopicDefaults::default()
        };
        let entries = topic_configs(
            &d,
            &topic(
                3,
                &[("cleanup.policy", "compact"), ("compression.type", "zstd")],
            ),
        );
        // compact alone turns retention off, whatever the broker default says.
        let retention = find(&entries, "retention.ms");
        assert_eq!(
            (retention.value.as_str(), retention.source),
            ("-1", SOURCE_STATIC_BROKER)
        );
        assert_eq!(find(&entries, "segment.ms").value, i64::MAX.to_string());
        assert_eq!(find(&entries, "cleanup.policy").value, "compact");
        let c = find(&entries, "compression.type");
        assert_eq!((c.value.as_str(), c.source), ("zstd", SOURCE_TOPIC));
        let t = find(&entries, "message.timestamp.type");
        assert_eq!((t.value.as_str(), t.source), ("CreateTime", SOURCE_DEFAULT));
    }
}
