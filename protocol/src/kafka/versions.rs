//! Version ranges on the Kafka port: what this crate's codec can carry per API, and the
//! ApiVersions list of a server's API table.
//!
//! Which APIs and versions spool implements is stated once, in the broker's Kafka API table
//! (`spool_broker::kafka::dispatch`), next to each API's handler; the codec takes that table as an
//! argument ([`super::codec::decode_request`]) so the decoder, ApiVersions and the dispatcher
//! cannot disagree. This module says what any such table may contain: [`codec_range`], the
//! versions the codec decodes and encodes — the crate's, widened down by the legacy versions
//! served by hand ([`super::legacy`]) — and a broker test checks every row lies inside it.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiKey;

use super::legacy;

/// The Fetch versions the splicing fetch encoder (`super::fetch`) frames; stated here, with the
/// other version bounds, so that this file imports nothing of the codec's (no import cycle).
pub const FETCH_MIN_VERSION: i16 = 4;
pub const FETCH_MAX_VERSION: i16 = 11;

pub use crate::versions::{is_supported, range, ApiRange};

/// A row of a Kafka API table.
pub type KafkaApiRange = ApiRange<ApiKey>;

/// The versions of `api_key` this codec can decode and encode: the `kafka-protocol` crate's
/// (Kafka's own message definitions) and below them the legacy versions served by hand
/// ([`super::legacy`]: OffsetCommit 0–1, OffsetFetch 0, DescribeConfigs 0), except Fetch, whose
/// response is framed by hand ([`super::fetch`]) for the versions that share one layout.
/// Legacy versions that are only refused lie outside it: a table cannot list them.
pub fn codec_range(api_key: ApiKey) -> (i16, i16) {
    let known = api_key.valid_versions();
    if api_key == ApiKey::Fetch {
        return (
            known.min.max(FETCH_MIN_VERSION),
            known.max.min(FETCH_MAX_VERSION),
        );
    }
    let min = legacy::served_min(api_key).map_or(known.min, |m| m.min(known.min));
    (min, known.max)
}

/// The `api_keys` list of an ApiVersions response for a server whose API table is `table`.
pub fn api_version_list(table: &[KafkaApiRange]) -> Vec<ApiVersion> {
    table
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.api_key as i16)
                .with_min_version(a.min_version)
                .with_max_version(a.max_version)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codec_carries_the_crates_versions_and_fetch_as_framed() {
        assert_eq!(codec_range(ApiKey::Fetch), (4, 11));
        let produce = ApiKey::Produce.valid_versions();
        assert_eq!(codec_range(ApiKey::Produce), (produce.min, produce.max));
        // Served by hand below the crate's range; Produce 0–2 are only refused.
        assert_eq!(codec_range(ApiKey::OffsetCommit).0, 0);
        assert_eq!(codec_range(ApiKey::OffsetFetch).0, 0);
        assert_eq!(codec_range(ApiKey::DescribeConfigs).0, 0);
    }

    #[test]
    fn api_versions_lists_the_table() {
        let table = [ApiRange {
            api_key: ApiKey::Fetch,
            min_version: 4,
            max_version: 11,
        }];
        let list = api_version_list(&table);
        assert_eq!(list.len(), 1);
        let f = &list[0];
        assert_eq!((f.api_key, f.min_version, f.max_version), (1, 4, 11));
    }
}
