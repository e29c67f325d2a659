//! Response bodies of the legacy versions ([`super::legacy`]), encoded by hand or by the crate at
//! a version of the same layout:
//!
//! - [`encode_served`]: OffsetCommit v0–1 (the v2 layout: topics [name, partitions
//!   [partition_index, error_code]], no throttle), OffsetFetch v0 (the v1 layout), and
//!   DescribeConfigs v0 by hand — each config's `is_default` is its source being
//!   [`DEFAULT_CONFIG`], where v1+ carry the source itself;
//! - [`encode_refusal`]: a refused version's answer, each item the request named echoed with the
//!   error code (UNSUPPORTED_VERSION), in that version's layout;
//! - [`decode_served`]: the client side of [`encode_served`], for tests and tools.
//!
//! The values an error answer must still fill in are Kafka's "none" values: offset -1,
//! timestamp -1, leader epoch -1, empty records, empty offset lists.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsResponse, OffsetCommitResponse, OffsetFetchResponse, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::legacy_requests::LegacyItems;
use super::primitives::{put_array_len, put_bool, put_nullable_string, put_string, Reader};

/// Kafka's `ConfigSource.DEFAULT_CONFIG`: the one source DescribeConfigs v0 reports, as
/// `is_default`.
pub const DEFAULT_CONFIG: i8 = 5;
/// Kafka's `ConfigSource.UNKNOWN`: what a v0 config that is not the default reads back as.
pub const UNKNOWN_CONFIG: i8 = 0;

/// The version of the crate's layout a served legacy version's response shares, if any.
fn same_layout(api_key: ApiKey, version: i16) -> Option<i16> {
    match (api_key, version) {
        (ApiKey::OffsetCommit, 0 | 1) => Some(2),
        (ApiKey::OffsetFetch, 0) => Some(1),
        _ => None,
    }
}

/// Appends the body of a served legacy version's response.
pub fn encode_served(
    api_key: ApiKey,
    version: i16,
    body: &ResponseKind,
    out: &mut BytesMut,
) -> Result<(), String> {
    match (body, same_layout(api_key, version)) {
        (ResponseKind::OffsetCommit(r), Some(v)) => r.encode(out, v).map_err(|e| e.to_string()),
        (ResponseKind::OffsetFetch(r), Some(v)) => r.encode(out, v).map_err(|e| e.to_string()),
        (ResponseKind::DescribeConfigs(r), None) if version == 0 => {
            describe_configs_v0(r, out);
            Ok(())
        }
        _ => Err(format!("{api_key:?} v{version} is not served by hand")),
    }
}

/// DescribeConfigs v0: throttle_time_ms, results [error_code, error_message, resource_type,
/// resource_name, configs [name, value, read_only, is_default, is_sensitive]].
fn describe_configs_v0(r: &DescribeConfigsResponse, out: &mut BytesMut) {
    out.put_i32(r.throttle_time_ms);
    put_array_len(out, r.results.len());
    for res in &r.results {
        out.put_i16(res.error_code);
        put_nullable_string(out, res.error_message.as_deref());
        out.put_i8(res.resource_type);
        put_string(out, &res.resource_name);
        put_array_len(out, res.configs.len());
        for c in &res.configs {
            put_string(out, &c.name);
            put_nullable_string(out, c.value.as_deref());
            put_bool(out, c.read_only);
            put_bool(out, c.config_source == DEFAULT_CONFIG);
            put_bool(out, c.is_sensitive);
        }
    }
}

/// Decodes a served legacy version's response body (the client side of [`encode_served`]).
/// DescribeConfigs v0's `is_default` reads back as source [`DEFAULT_CONFIG`], and as
/// [`UNKNOWN_CONFIG`] when false. What follows the body stays in `buf`.
pub fn decode_served(
    api_key: ApiKey,
    version: i16,
    buf: &mut Bytes,
) -> Result<ResponseKind, String> {
    match (api_key, same_layout(api_key, version)) {
        (ApiKey::OffsetCommit, Some(v)) => OffsetCommitResponse::decode(buf, v)
            .map(ResponseKind::OffsetCommit)
            .map_err(|e| e.to_string()),
        (ApiKey::OffsetFetch, Some(v)) => OffsetFetchResponse::decode(buf, v)
            .map(ResponseKind::OffsetFetch)
            .map_err(|e| e.to_string()),
        (ApiKey::DescribeConfigs, None) if version == 0 => {
            let mut r = Reader::new(std::mem::take(buf));
            let decoded = decode_describe_configs_v0(&mut r);
            *buf = r.into_rest();
            decoded.map(ResponseKind::DescribeConfigs)
        }
        _ => Err(format!("{api_key:?} v{version} is not served by hand")),
    }
}

fn decode_describe_configs_v0(r: &mut Reader) -> Result<DescribeConfigsResponse, String> {
    let throttle_time_ms = r.i32()?;
    let results = r.array(|r| {
        let error_code = r.i16()?;
        let error_message = r.nullable_string()?;
        let resource_type = r.i8()?;
        let resource_name = r.string()?;
        let configs = r.array(|r| {
            let name = r.string()?;
            let value = r.nullable_string()?;
            let read_only = r.bool()?;
            let is_default = r.bool()?;
            let is_sensitive = r.bool()?;
            Ok(DescribeConfigsResourceResult::default()
                .with_name(name)
                .with_value(value)
                .with_read_only(read_only)
                .with_config_source(if is_default {
                    DEFAULT_CONFIG
                } else {
                    UNKNOWN_CONFIG
                })
                .with_is_sensitive(is_sensitive))
        })?;
        Ok(DescribeConfigsResult::default()
            .with_error_code(error_code)
            .with_error_message(error_message)
            .with_resource_type(resource_type)
            .with_resource_name(resource_name)
            .with_configs(configs))
    })?;
    Ok(DescribeConfigsResponse::default()
        .with_throttle_time_ms(throttle_time_ms)
        .with_results(results))
}

/// Appends the body of a refused legacy version's answer: every item `items` names, with
/// `error_code`.
pub fn encode_refusal(
    api_key: ApiKey,
    version: i16,
    items: &LegacyItems,
    error_code: i16,
    out: &mut BytesMut,
) -> Result<(), String> {
    match (api_key, items) {
        (ApiKey::Produce, LegacyItems::Partitions(topics)) => {
            // v0: responses [name, partitions [index, error_code, base_offset]]; v1 adds
            // throttle_time_ms after the responses, v2 log_append_time_ms after base_offset.
            put_partitions(out, topics, |out, index| {
                out.put_i32(index);
                out.put_i16(error_code);
                out.put_i64(-1);
                if version >= 2 {
                    out.put_i64(-1);
                }
            });
            if version >= 1 {
                out.put_i32(0);
            }
        }
        (ApiKey::Fetch, LegacyItems::Partitions(topics)) => {
            // v0: responses [topic, partitions [partition_index, error_code, high_watermark,
            // records]]; v1+ start with throttle_time_ms.
            if version >= 1 {
                out.put_i32(0);
            }
            put_partitions(out, topics, |out, index| {
                out.put_i32(index);
                out.put_i16(error_code);
                out.put_i64(-1);
                out.put_i32(0);
            });
        }
        (ApiKey::ListOffsets, LegacyItems::Partitions(topics)) => {
            // v0: topics [name, partitions [partition_index, error_code, old_style_offsets]].
            put_partitions(out, topics, |out, index| {
                out.put_i32(index);
                out.put_i16(error_code);
                put_array_len(out, 0);
            });
        }
        (ApiKey::OffsetForLeaderEpoch, LegacyItems::Partitions(topics)) => {
            // v0: topics [topic, partitions [error_code, partition, end_offset]]; v1 adds
            // leader_epoch before end_offset.
            put_partitions(out, topics, |out, index| {
                out.put_i16(error_code);
                out.put_i32(index);
                if version >= 1 {
                    out.put_i32(-1);
                }
                out.put_i64(-1);
            });
        }
        (ApiKey::CreateTopics | ApiKey::DeleteTopics, LegacyItems::Topics(names)) => {
            // CreateTopics v0 and DeleteTopics v0: [name, error_code]; CreateTopics v1 adds
            // error_message.
            put_array_len(out, names.len());
            for name in names {
                put_string(out, name);
                out.put_i16(error_code);
                if api_key == ApiKey::CreateTopics && version >= 1 {
                    put_nullable_string(out, None);
                }
            }
        }
        (ApiKey::DescribeAcls, LegacyItems::Nothing) => {
            // v0: throttle_time_ms, error_code, error_message, resources.
            out.put_i32(0);
            out.put_i16(error_code);
            put_nullable_string(out, None);
            put_array_len(out, 0);
        }
        (ApiKey::CreateAcls, LegacyItems::Count(n)) => {
            // v0: throttle_time_ms, results [error_code, error_message].
            out.put_i32(0);
            put_array_len(out, *n);
            for _ in 0..*n {
                out.put_i16(error_code);
                put_nullable_string(out, None);
            }
        }
        (ApiKey::DeleteAcls, LegacyItems::Count(n)) => {
            // v0: throttle_time_ms, filter_results [error_code, error_message, matching_acls].
            out.put_i32(0);
            put_array_len(out, *n);
            for _ in 0..*n {
                out.put_i16(error_code);
                put_nullable_string(out, None);
                put_array_len(out, 0);
            }
        }
        _ => return Err(format!("no refusal layout for {api_key:?} v{version}")),
    }
    Ok(())
}

/// topics [name, partitions [`partition`]].
fn put_partitions(
    out: &mut BytesMut,
    topics: &[(kafka_protocol::protocol::StrBytes, Vec<i32>)],
    mut partition: impl FnMut(&mut BytesMut, i32),
) {
    put_array_len(out, topics.len());
    for (name, partitions) in topics {
        put_string(out, name);
        put_array_len(out, partitions.len());
        for &p in partitions {
            partition(out, p);
        }
    }
}
