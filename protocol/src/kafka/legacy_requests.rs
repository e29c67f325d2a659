//! Request bodies of the legacy versions ([`super::legacy`]), decoded by hand from Kafka's
//! message definitions (clients/src/main/resources/common/message/*.json, Kafka 3.9).
//!
//! - [`decode_served`]: OffsetCommit v0–1, OffsetFetch v0 and DescribeConfigs v0 into the
//!   crate's request structs, so the broker's handlers serve them like any other version;
//! - [`decode_refused`]: the versions spool refuses, read only far enough to name each item the
//!   UNSUPPORTED_VERSION answer must echo ([`Refusal`]).
//!
//! Nothing here panics on input or allocates from a claimed count ([`super::primitives`]).
//! Fields a served version carries that the crate's struct lacks are read and dropped:
//! OffsetCommit v1's `commit_timestamp` (spool stamps a commit when it stores it, as Kafka does
//! for -1, the value clients send).

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    describe_configs_request::DescribeConfigsResource,
    offset_fetch_request::OffsetFetchRequestTopic, ApiKey, DescribeConfigsRequest, GroupId,
    OffsetCommitRequest, OffsetFetchRequest, RequestKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::primitives::Reader;

/// What a refused legacy request names, for its answer to echo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LegacyItems {
    /// Topics and their partitions (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch).
    Partitions(Vec<(StrBytes, Vec<i32>)>),
    /// Topics (CreateTopics, DeleteTopics).
    Topics(Vec<StrBytes>),
    /// How many entries (CreateAcls' creations, DeleteAcls' filters): one result each.
    Count(usize),
    /// Nothing to name (DescribeAcls, whose answer has a top-level error).
    Nothing,
}

/// A refused legacy request, as its answer needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub items: LegacyItems,
    /// False for an acks=0 Produce: the client reads no response, so none is sent.
    pub answer: bool,
}

/// Decodes a served legacy version's body into the crate's request struct.
pub fn decode_served(api_key: ApiKey, version: i16, body: Bytes) -> Result<RequestKind, String> {
    let r = &mut Reader::new(body);
    match (api_key, version) {
        (ApiKey::OffsetCommit, 0 | 1) => offset_commit(r, version).map(RequestKind::OffsetCommit),
        (ApiKey::OffsetFetch, 0) => offset_fetch(r).map(RequestKind::OffsetFetch),
        (ApiKey::DescribeConfigs, 0) => describe_configs(r).map(RequestKind::DescribeConfigs),
        _ => Err(format!("{api_key:?} v{version} is not served by hand")),
    }
}

/// OffsetCommit v0: group_id, topics [name, partitions [partition_index, committed_offset,
/// committed_metadata]]. v1 adds generation_id and member_id after the group, and
/// commit_timestamp after the offset. v0 commits outside any generation (generation -1, no
/// member), a simple commit.
fn offset_commit(r: &mut Reader, version: i16) -> Result<OffsetCommitRequest, String> {
    let group_id = GroupId(r.string()?);
    let (generation, member_id) = if version >= 1 {
        (r.i32()?, r.string()?)
    } else {
        (-1, StrBytes::default())
    };
    let topics = r.array(|r| {
        let name = TopicName(r.string()?);
        let partitions = r.array(|r| {
            let partition_index = r.i32()?;
            let committed_offset = r.i64()?;
            if version >= 1 {
                let _commit_timestamp = r.i64()?;
            }
            let committed_metadata = r.nullable_string()?;
            Ok(OffsetCommitRequestPartition::default()
                .with_partition_index(partition_index)
                .with_committed_offset(committed_offset)
                .with_committed_metadata(committed_metadata))
        })?;
        Ok(OffsetCommitRequestTopic::default()
            .with_name(name)
            .with_partitions(partitions))
    })?;
    Ok(OffsetCommitRequest::default()
        .with_group_id(group_id)
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(member_id)
        .with_topics(topics))
}

/// OffsetFetch v0 (as v1): group_id, topics [name, partition_indexes [int32]].
fn offset_fetch(r: &mut Reader) -> Result<OffsetFetchRequest, String> {
    let group_id = GroupId(r.string()?);
    let topics = r.array(|r| {
        let name = TopicName(r.string()?);
        let partition_indexes = r.array(Reader::i32)?;
        Ok(OffsetFetchRequestTopic::default()
            .with_name(name)
            .with_partition_indexes(partition_indexes))
    })?;
    Ok(OffsetFetchRequest::default()
        .with_group_id(group_id)
        .with_topics(Some(topics)))
}

/// DescribeConfigs v0: resources [resource_type int8, resource_name, configuration_keys
/// nullable [string]] (v1 adds include_synonyms, false here).
fn describe_configs(r: &mut Reader) -> Result<DescribeConfigsRequest, String> {
    let resources = r.array(|r| {
        let resource_type = r.i8()?;
        let resource_name = r.string()?;
        let keys = match r.nullable_array_len()? {
            None => None,
            Some(n) => Some(r.elements(n, Reader::string)?),
        };
        Ok(DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(resource_name)
            .with_configuration_keys(keys))
    })?;
    Ok(DescribeConfigsRequest::default().with_resources(resources))
}

/// Decodes a refused legacy version's body far enough to name its items.
pub fn decode_refused(api_key: ApiKey, version: i16, body: Bytes) -> Result<Refusal, String> {
    let r = &mut Reader::new(body);
    let answered = |items| Refusal {
        items,
        answer: true,
    };
    match (api_key, version) {
        (ApiKey::Produce, 0..=2) => produce(r),
        (ApiKey::Fetch, 0..=3) => fetch(r, version).map(answered),
        (ApiKey::ListOffsets, 0) => list_offsets(r).map(answered),
        (ApiKey::CreateTopics, 0 | 1) => create_topics(r).map(answered),
        (ApiKey::DeleteTopics, 0) => r
            .array(Reader::string)
            .map(|t| answered(LegacyItems::Topics(t))),
        (ApiKey::OffsetForLeaderEpoch, 0 | 1) => partitions(r, |r| {
            let partition = r.i32()?;
            let _leader_epoch = r.i32()?;
            Ok(partition)
        })
        .map(answered),
        (ApiKey::DescribeAcls, 0) => {
            acl_filter(r)?;
            Ok(answered(LegacyItems::Nothing))
        }
        (ApiKey::CreateAcls, 0) => r
            .array(|r| {
                let _resource_type = r.i8()?;
                for _resource_name_principal_host in 0..3 {
                    r.string()?;
                }
                let _operation_permission = (r.i8()?, r.i8()?);
                Ok(())
            })
            .map(|c| answered(LegacyItems::Count(c.len()))),
        (ApiKey::DeleteAcls, 0) => r
            .array(acl_filter)
            .map(|f| answered(LegacyItems::Count(f.len()))),
        _ => Err(format!("{api_key:?} v{version} is not refused by hand")),
    }
}

/// topics [name, partitions [`partition`]]: the shape most data requests share.
fn partitions(
    r: &mut Reader,
    mut partition: impl FnMut(&mut Reader) -> Result<i32, String>,
) -> Result<LegacyItems, String> {
    let topics = r.array(|r| {
        let name = r.string()?;
        let partitions = r.array(&mut partition)?;
        Ok((name, partitions))
    })?;
    Ok(LegacyItems::Partitions(topics))
}

/// Produce v0–2: acks, timeout_ms, topics [name, partitions [index, records]].
fn produce(r: &mut Reader) -> Result<Refusal, String> {
    let acks = r.i16()?;
    let _timeout_ms = r.i32()?;
    let items = partitions(r, |r| {
        let index = r.i32()?;
        let _records = r.nullable_bytes()?;
        Ok(index)
    })?;
    Ok(Refusal {
        items,
        answer: acks != 0,
    })
}

/// Fetch v0–3: replica_id, max_wait_ms, min_bytes, (v3) max_bytes, topics [topic, partitions
/// [partition, fetch_offset, partition_max_bytes]].
fn fetch(r: &mut Reader, version: i16) -> Result<LegacyItems, String> {
    let _replica_wait_min = (r.i32()?, r.i32()?, r.i32()?);
    if version >= 3 {
        let _max_bytes = r.i32()?;
    }
    partitions(r, |r| {
        let partition = r.i32()?;
        let _fetch_offset = r.i64()?;
        let _partition_max_bytes = r.i32()?;
        Ok(partition)
    })
}

/// ListOffsets v0: replica_id, topics [name, partitions [partition_index, timestamp,
/// max_num_offsets]].
fn list_offsets(r: &mut Reader) -> Result<LegacyItems, String> {
    let _replica_id = r.i32()?;
    partitions(r, |r| {
        let partition = r.i32()?;
        let _timestamp = r.i64()?;
        let _max_num_offsets = r.i32()?;
        Ok(partition)
    })
}

/// CreateTopics v0–1: topics [name, num_partitions, replication_factor, assignments
/// [partition_index, broker_ids [int32]], configs [name, value nullable]], timeout_ms, (v1)
/// validate_only. Only the topics matter to the answer; what follows them is not read.
fn create_topics(r: &mut Reader) -> Result<LegacyItems, String> {
    let topics = r.array(|r| {
        let name = r.string()?;
        let _partitions_replication = (r.i32()?, r.i16()?);
        r.array(|r| {
            let _partition_index = r.i32()?;
            r.array(Reader::i32).map(drop)
        })?;
        r.array(|r| {
            r.string()?;
            r.nullable_string().map(drop)
        })?;
        Ok(name)
    })?;
    Ok(LegacyItems::Topics(topics))
}

/// An ACL filter of v0 (DescribeAcls' body, each of DeleteAcls' filters): resource_type,
/// resource_name, principal, host (nullable), operation, permission_type.
fn acl_filter(r: &mut Reader) -> Result<(), String> {
    let _resource_type = r.i8()?;
    for _name_principal_host in 0..3 {
        r.nullable_string()?;
    }
    let _operation_permission = (r.i8()?, r.i8()?);
    Ok(())
}
