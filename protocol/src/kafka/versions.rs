//! The Kafka APIs and versions spool implements on its Kafka port: one table that the ApiVersions
//! response, the request dispatcher's version check and the README's compatibility table all come
//! from.
//!
//! Every range lies inside what the `kafka-protocol` crate can decode and encode (checked by a
//! test), and the ranges are chosen so that librdkafka 2.x, kafka-python 2.x and the Java clients
//! 3.x negotiate a version spool handles: clients take the highest version both sides list.
//! Caps below Kafka's own maxima, and why:
//! - Fetch ≤ 11: v12+ are flexible (tagged fields around records) and v13+ name topics by id; the
//!   Fetch response is framed by hand so records can be spliced from segment files (see
//!   [`super::fetch`]), and 4–11 share one layout.
//! - Produce ≤ 9, ListOffsets ≤ 7, Metadata ≤ 9, DeleteTopics ≤ 5: later versions identify topics
//!   by id, which spool's metadata does not assign yet.
//! - FindCoordinator ≤ 3 and OffsetFetch ≤ 7: later versions batch several keys or groups per
//!   request; clients fall back to one request per key.
//! - OffsetCommit ≤ 8: v9+ belong to the KIP-848 consumer protocol.
//! - ApiVersions ≤ 3: a client asking for more gets the KIP-511 fallback (a v0 response with
//!   UNSUPPORTED_VERSION and this table) and retries with v3.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiKey;

/// `(api key, min version, max version)` implemented on the Kafka port, in api-key order.
pub const SUPPORTED: [(ApiKey, i16, i16); 18] = [
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 11),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 9),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 3),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
];

/// The implemented range of `api_key`, if spool implements it at all.
pub fn range(api_key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == api_key)
        .map(|(_, lo, hi)| (*lo, *hi))
}

/// Whether spool implements `version` of `api_key`.
pub fn is_supported(api_key: ApiKey, version: i16) -> bool {
    range(api_key).is_some_and(|(lo, hi)| (lo..=hi).contains(&version))
}

/// The `api_keys` list of an ApiVersions response.
pub fn api_version_list() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|(k, lo, hi)| {
            ApiVersion::default()
                .with_api_key(*k as i16)
                .with_min_version(*lo)
                .with_max_version(*hi)
        })
        .collect()
}

/// The table as Markdown rows (`| Name | key | min–max |`), for the README's compatibility table.
pub fn markdown_table() -> String {
    let mut out = String::from("| API | key | versions |\n|---|---|---|\n");
    for (k, lo, hi) in SUPPORTED {
        out.push_str(&format!("| {k:?} | {} | {lo}–{hi} |\n", k as i16));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_is_inside_what_the_codec_knows() {
        for (k, lo, hi) in SUPPORTED {
            let known = k.valid_versions();
            assert!(lo <= hi, "{k:?}");
            assert!(
                known.min <= lo && hi <= known.max,
                "{k:?} {lo}..{hi} vs {known}"
            );
        }
    }

    #[test]
    fn each_api_is_listed_once_in_key_order() {
        for w in SUPPORTED.windows(2) {
            let (a, b) = (w[0].0 as i16, w[1].0 as i16);
            assert!(a < b, "{:?} before {:?}", w[0].0, w[1].0);
        }
        assert!(is_supported(ApiKey::ApiVersions, 3));
        assert!(!is_supported(ApiKey::ApiVersions, 4));
        assert!(!is_supported(ApiKey::Produce, 2));
        assert!(!is_supported(ApiKey::SaslHandshake, 0));
        assert_eq!(api_version_list().len(), SUPPORTED.len());
        assert!(markdown_table().contains("| Fetch | 1 | 4–11 |"));
    }
}
