//! API version ranges: the row type of a server's API table, and the native protocol's rule for
//! versions.
//!
//! The ranges themselves are stated once, by the server that implements them: the broker's API
//! tables (`spool_broker::apis` and the two fronts' tables it documents) list each API with its
//! versions and its handler, and everything else — the ApiVersions answers, the refusal of what
//! is not implemented, the README's tables — is derived from them. This module only gives the
//! row a type ([`ApiRange`], for either protocol's key type) and the lookups every user needs.
//!
//! Native rule: every native API is at version 0 (the client library sends 0). The schemas evolve
//! by appending fields (flatbuffers keeps old readers working), so a version bump is reserved for
//! a change in meaning. A server answers a request outside its ranges with UNSUPPORTED_VERSION.

use crate::wire::{ApiKey, ApiVersionRangeT, ApiVersionsResponseT};

/// One API a server implements and the versions it accepts (inclusive). `K` is the protocol's key
/// type: [`crate::wire::ApiKey`] natively, `kafka_protocol::messages::ApiKey` on the Kafka port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange<K> {
    pub api_key: K,
    pub min_version: i16,
    pub max_version: i16,
}

impl<K: Copy + PartialEq> ApiRange<K> {
    /// Whether `version` lies inside this range.
    pub fn contains(&self, version: i16) -> bool {
        (self.min_version..=self.max_version).contains(&version)
    }
}

/// The range `table` gives `api_key`, if it lists it.
pub fn range<K: Copy + PartialEq>(table: &[ApiRange<K>], api_key: K) -> Option<ApiRange<K>> {
    table.iter().find(|r| r.api_key == api_key).copied()
}

/// Whether `table` lists `api_key` with `version` inside its range.
pub fn is_supported<K: Copy + PartialEq>(table: &[ApiRange<K>], api_key: K, version: i16) -> bool {
    range(table, api_key).is_some_and(|r| r.contains(version))
}

/// The native ApiVersions body of a server whose API table is `table`.
pub fn api_versions_response(table: &[ApiRange<ApiKey>]) -> ApiVersionsResponseT {
    let mut r = ApiVersionsResponseT::default();
    r.api_keys = Some(
        table
            .iter()
            .map(|a| ApiVersionRangeT {
                api_key: a.api_key,
                min_version: a.min_version,
                max_version: a.max_version,
            })
            .collect(),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: [ApiRange<ApiKey>; 2] = [
        ApiRange {
            api_key: ApiKey::Produce,
            min_version: 0,
            max_version: 0,
        },
        ApiRange {
            api_key: ApiKey::Fetch,
            min_version: 0,
            max_version: 2,
        },
    ];

    #[test]
    fn lookups_follow_the_table() {
        assert!(is_supported(&TABLE, ApiKey::Produce, 0));
        assert!(!is_supported(&TABLE, ApiKey::Produce, 1));
        assert!(is_supported(&TABLE, ApiKey::Fetch, 2));
        assert!(!is_supported(&TABLE, ApiKey::Fetch, -1));
        assert!(!is_supported(&TABLE, ApiKey::Metadata, 0));
        assert_eq!(range(&TABLE, ApiKey::Fetch), Some(TABLE[1]));
        assert_eq!(range(&TABLE, ApiKey::Metadata), None);
    }

    #[test]
    fn api_versions_lists_the_table_in_order() {
        let keys = api_versions_response(&TABLE).api_keys.unwrap_or_default();
        let got: Vec<_> = keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(got, [(ApiKey::Produce, 0, 0), (ApiKey::Fetch, 0, 2)]);
    }
}
