//! The admin client's topic changes past create/delete: add partitions, alter configs, elect
//! leaders (each to any broker, which forwards to the active controller), and delete records
//! (to the partition's leader, found with a Metadata request and cached; a leader error drops
//! the cached leader and retries within the operation's timeout, as Kafka's admin client does).
//!
//! Per-topic and per-partition refusals (INVALID_PARTITIONS, INVALID_CONFIG,
//! ELECTION_NOT_NEEDED, ...) come back as results, not retries: they will not change by asking
//! again.

use crate::client::{ClientError, TopicPartition};
use crate::wire::{
    AlterTopicConfigsT, AlterableConfigT, ConfigOperation, CreatePartitionsRequestT,
    CreatePartitionsTopicT, DeleteRecordsPartitionT, DeleteRecordsRequestT, ElectLeadersRequestT,
    ElectionType, IncrementalAlterConfigsRequestT, MetadataRequestT, PartitionErrorT,
    PartitionRefT, RequestBodyT, ResponseBodyT, TopicErrorT,
};
use crate::ErrorCode;

use super::{AdminOp, AdminOutcome, TopicResult};

/// One config change of [`AdminOp::AlterConfigs`] (Kafka's AlterConfigOp).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    Set(String, String),
    /// Back to the default.
    Delete(String),
    /// Adds an element to a list config (cleanup.policy).
    Append(String, String),
    /// Removes an element from a list config.
    Subtract(String, String),
}

/// Per-partition outcome.
pub type PartitionResult = (TopicPartition, Result<(), ClientError>);

/// The partition whose leader an operation must be sent to.
pub(crate) fn leader_key(op: &AdminOp) -> Option<&TopicPartition> {
    match op {
        AdminOp::DeleteRecords { partition, .. } => Some(partition),
        _ => None,
    }
}

/// The Metadata request that finds `tp`'s leader.
pub(crate) fn find_leader(tp: &TopicPartition) -> RequestBodyT {
    let mut r = MetadataRequestT::default();
    r.topics = Some(vec![tp.topic.clone()]);
    RequestBodyT::MetadataRequest(Box::new(r))
}

/// `tp`'s leader's `host:port` from a Metadata response, or the error to retry on.
pub(crate) fn leader_addr(body: &ResponseBodyT, tp: &TopicPartition) -> Result<String, ErrorCode> {
    let ResponseBodyT::MetadataResponse(r) = body else {
        return Err(ErrorCode::UnknownServerError);
    };
    let topic = r
        .topics
        .iter()
        .flatten()
        .find(|t| t.name == tp.topic)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    let code = ErrorCode::from(topic.error_code);
    if !code.is_ok() {
        return Err(code);
    }
    let partition = topic
        .partitions
        .iter()
        .flatten()
        .find(|p| p.partition_index == tp.partition)
        .ok_or(ErrorCode::UnknownTopicOrPartition)?;
    let leader = partition.leader_id;
    r.brokers
        .iter()
        .flatten()
        .find(|b| b.node_id == leader && leader >= 0)
        .map(|b| format!("{}:{}", b.host, b.port))
        .ok_or(ErrorCode::LeaderNotAvailable)
}

/// Whether an error means the cached leader is wrong.
pub(crate) fn is_leader_error(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotLeaderOrFollower
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::FencedLeaderEpoch
            | ErrorCode::UnknownLeaderEpoch
    )
}

pub(crate) fn body(op: &AdminOp) -> Option<RequestBodyT> {
    Some(match op {
        AdminOp::CreatePartitions {
            topic,
            count,
            validate_only,
            timeout_ms,
        } => {
            let mut t = CreatePartitionsTopicT::default();
            t.name = topic.clone();
            t.count = *count;
            let mut r = CreatePartitionsRequestT::default();
            r.topics = Some(vec![t]);
            r.timeout_ms = *timeout_ms;
            r.validate_only = *validate_only;
            RequestBodyT::CreatePartitionsRequest(Box::new(r))
        }
        AdminOp::AlterConfigs {
            topic,
            changes,
            validate_only,
        } => {
            let mut t = AlterTopicConfigsT::default();
            t.topic = topic.clone();
            t.configs = Some(changes.iter().map(alterable).collect());
            let mut r = IncrementalAlterConfigsRequestT::default();
            r.topics = Some(vec![t]);
            r.validate_only = *validate_only;
            RequestBodyT::IncrementalAlterConfigsRequest(Box::new(r))
        }
        AdminOp::ElectLeaders {
            unclean,
            partitions,
            timeout_ms,
        } => {
            let mut r = ElectLeadersRequestT::default();
            r.election_type = if *unclean {
                ElectionType::Unclean
            } else {
                ElectionType::Preferred
            };
            r.partitions = partitions.as_ref().map(|ps| {
                ps.iter()
                    .map(|tp| {
                        let mut p = PartitionRefT::default();
                        p.topic = tp.topic.clone();
                        p.partition = tp.partition;
                        p
                    })
                    .collect()
            });
            r.timeout_ms = *timeout_ms;
            RequestBodyT::ElectLeadersRequest(Box::new(r))
        }
        AdminOp::DeleteRecords {
            partition,
            before_offset,
            timeout_ms,
        } => {
            let mut p = DeleteRecordsPartitionT::default();
            p.topic = partition.topic.clone();
            p.partition = partition.partition;
            p.offset = *before_offset;
            let mut r = DeleteRecordsRequestT::default();
            r.partitions = Some(vec![p]);
            r.timeout_ms = *timeout_ms;
            RequestBodyT::DeleteRecordsRequest(Box::new(r))
        }
        _ => return None,
    })
}

fn alterable(change: &ConfigChange) -> AlterableConfigT {
    let (name, operation, value) = match change {
        ConfigChange::Set(k, v) => (k, ConfigOperation::Set, Some(v)),
        ConfigChange::Delete(k) => (k, ConfigOperation::Delete, None),
        ConfigChange::Append(k, v) => (k, ConfigOperation::Append, Some(v)),
        ConfigChange::Subtract(k, v) => (k, ConfigOperation::Subtract, Some(v)),
    };
    let mut c = AlterableConfigT::default();
    c.name = name.clone();
    c.operation = operation;
    c.value = value.cloned();
    c
}

fn topic_results(topics: Option<Vec<TopicErrorT>>, what: &str) -> Vec<TopicResult<()>> {
    topics
        .into_iter()
        .flatten()
        .map(|t| {
            let code = ErrorCode::from(t.error_code);
            let res = if code.is_ok() {
                Ok(())
            } else {
                Err(super::err(code, &t.error_message, what, &t.name))
            };
            (t.name, res)
        })
        .collect()
}

pub(crate) fn partition_results(
    partitions: Option<Vec<PartitionErrorT>>,
    what: &str,
) -> Vec<PartitionResult> {
    let mut out: Vec<PartitionResult> = partitions
        .into_iter()
        .flatten()
        .map(|p| {
            let tp = TopicPartition::new(p.topic, p.partition);
            let code = ErrorCode::from(p.error_code);
            let res = if code.is_ok() {
                Ok(())
            } else {
                Err(super::err(code, &p.error_message, what, &tp.to_string()))
            };
            (tp, res)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The outcome of a topic change, or the error code to retry or fail with.
pub(crate) fn outcome(
    op: &AdminOp,
    body: ResponseBodyT,
) -> Option<Result<AdminOutcome, ErrorCode>> {
    Some(match (op, body) {
        (AdminOp::CreatePartitions { .. }, ResponseBodyT::CreatePartitionsResponse(r)) => Ok(
            AdminOutcome::CreatePartitions(topic_results(r.topics, "add partitions to")),
        ),
        (AdminOp::AlterConfigs { .. }, ResponseBodyT::IncrementalAlterConfigsResponse(r)) => Ok(
            AdminOutcome::AlterConfigs(topic_results(r.topics, "alter configs of")),
        ),
        (AdminOp::ElectLeaders { .. }, ResponseBodyT::ElectLeadersResponse(r)) => Ok(
            AdminOutcome::ElectLeaders(partition_results(r.partitions, "elect a leader for")),
        ),
        (AdminOp::DeleteRecords { partition, .. }, ResponseBodyT::DeleteRecordsResponse(r)) => {
            let found = r
                .partitions
                .iter()
                .flatten()
                .find(|p| p.topic == partition.topic && p.partition == partition.partition);
            let Some(p) = found else {
                return Some(Err(ErrorCode::UnknownServerError));
            };
            let code = ErrorCode::from(p.error_code);
            if code.is_ok() {
                Ok(AdminOutcome::DeleteRecords(p.low_watermark))
            } else {
                Err(code)
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{AdminConfig, AdminCore};
    use super::*;
    use crate::client::net::ClientCore;
    use crate::client::test_util::{metadata, next_request, requests, respond};
    use crate::wire::{DeleteRecordsPartitionResultT, DeleteRecordsResponseT};

    fn deleted(code: ErrorCode, low_watermark: i64) -> ResponseBodyT {
        let mut p = DeleteRecordsPartitionResultT::default();
        p.topic = "t".into();
        p.partition = 1;
        p.error_code = code.into();
        p.low_watermark = low_watermark;
        let mut r = DeleteRecordsResponseT::default();
        r.partitions = Some(vec![p]);
        ResponseBodyT::DeleteRecordsResponse(Box::new(r))
    }

    #[test]
    fn delete_records_goes_to_the_leader_and_finds_it_again_after_not_leader() {
        let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
        let tp = TopicPartition::new("t", 1);
        let id = core
            .submit(
                AdminOp::DeleteRecords {
                    partition: tp.clone(),
                    before_offset: 4,
                    timeout_ms: 1000,
                },
                0,
            )
            .unwrap();
        let mut now = 0u64;
        // metadata → leader b1, delete → NOT_LEADER, metadata → leader b2, delete → 4.
        for (expect_find, expect_addr, answer) in [
            (true, None, metadata("t", &[0, 1], 3)),
            (
                false,
                Some("b1:1"),
                deleted(ErrorCode::NotLeaderOrFollower, -1),
            ),
            (true, None, metadata("t", &[0, 2], 3)),
            (false, Some("b2:1"), deleted(ErrorCode::None, 4)),
        ] {
            let (addr, req) = next_request(&mut core, &mut now);
            let is_find = matches!(req.header.body, RequestBodyT::MetadataRequest(_));
            assert_eq!(is_find, expect_find, "{req:?}");
            if let Some(a) = expect_addr {
                assert_eq!(addr, a);
            }
            core.on_response(&addr, respond(&req, answer, bytes::Bytes::new()), now);
        }
        let results = core.take_results();
        assert_eq!(results, vec![(id, Ok(AdminOutcome::DeleteRecords(4)))]);
    }

    #[test]
    fn a_refused_deletion_fails_at_once_with_its_code() {
        let mut core = AdminCore::new(AdminConfig::default(), vec!["boot:1".into()]).unwrap();
        core.submit(
            AdminOp::DeleteRecords {
                partition: TopicPartition::new("t", 1),
                before_offset: 99,
                timeout_ms: 1000,
            },
            0,
        )
        .unwrap();
        for answer in [
            metadata("t", &[0, 1], 2),
            deleted(ErrorCode::OffsetOutOfRange, -1),
        ] {
            let (addr, req) = requests(&core.poll_actions(0)).remove(0);
            core.on_response(&addr, respond(&req, answer, bytes::Bytes::new()), 0);
        }
        let results = core.take_results();
        let [(_, Err(e))] = results.as_slice() else {
            panic!("{results:?}")
        };
        assert_eq!(e.error_code(), Some(ErrorCode::OffsetOutOfRange));
    }

    #[test]
    fn config_changes_are_sent_as_incremental_operations() {
        let op = AdminOp::AlterConfigs {
            topic: "t".into(),
            changes: vec![
                ConfigChange::Set("retention.ms".into(), "1000".into()),
                ConfigChange::Delete("segment.bytes".into()),
            ],
            validate_only: false,
        };
        let Some(RequestBodyT::IncrementalAlterConfigsRequest(r)) = body(&op) else {
            panic!("not an IncrementalAlterConfigs request")
        };
        let configs = r.topics.unwrap().remove(0).configs.unwrap();
        let got: Vec<(String, ConfigOperation, Option<String>)> = configs
            .into_iter()
            .map(|c| (c.name, c.operation, c.value))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "retention.ms".into(),
                    ConfigOperation::Set,
                    Some("1000".into())
                ),
                ("segment.bytes".into(), ConfigOperation::Delete, None),
            ]
        );
    }
}
