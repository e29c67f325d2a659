//! Which API versions this build speaks, for ApiVersions and for refusing what it does not.
//!
//! Every native API is at version 0: the schemas evolve by appending fields (flatbuffers keeps old
//! readers working), so a version bump is reserved for a change in meaning. A broker answers a
//! request outside these ranges with UNSUPPORTED_VERSION.

use crate::wire::{ApiKey, ApiVersionRangeT, ApiVersionsResponseT};

/// `(api key, min version, max version)` for every API the native protocol carries.
pub const SUPPORTED: [(ApiKey, i16, i16); 17] = [
    (ApiKey::Produce, 0, 0),
    (ApiKey::Fetch, 0, 0),
    (ApiKey::ListOffsets, 0, 0),
    (ApiKey::Metadata, 0, 0),
    (ApiKey::OffsetCommit, 0, 0),
    (ApiKey::OffsetFetch, 0, 0),
    (ApiKey::FindCoordinator, 0, 0),
    (ApiKey::JoinGroup, 0, 0),
    (ApiKey::Heartbeat, 0, 0),
    (ApiKey::LeaveGroup, 0, 0),
    (ApiKey::SyncGroup, 0, 0),
    (ApiKey::DescribeGroups, 0, 0),
    (ApiKey::ListGroups, 0, 0),
    (ApiKey::ApiVersions, 0, 0),
    (ApiKey::CreateTopics, 0, 0),
    (ApiKey::DeleteTopics, 0, 0),
    (ApiKey::InitProducerId, 0, 0),
];

/// Whether `version` of `api_key` is supported.
pub fn is_supported(api_key: ApiKey, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|(k, lo, hi)| *k == api_key && (*lo..=*hi).contains(&version))
}

/// The ApiVersions body a broker of this build answers with.
pub fn api_versions_response() -> ApiVersionsResponseT {
    let mut r = ApiVersionsResponseT::default();
    r.api_keys = Some(
        SUPPORTED
            .iter()
            .map(|(k, lo, hi)| ApiVersionRangeT {
                api_key: *k,
                min_version: *lo,
                max_version: *hi,
            })
            .collect(),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_key_is_listed_once() {
        assert_eq!(SUPPORTED.len(), ApiKey::ENUM_VALUES.len());
        for k in ApiKey::ENUM_VALUES {
            assert_eq!(SUPPORTED.iter().filter(|(s, _, _)| s == k).count(), 1);
            assert!(is_supported(*k, 0));
            assert!(!is_supported(*k, 1));
        }
    }
}
