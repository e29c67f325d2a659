//! The "legacy" versions: those Kafka 3.9 still serves but the `kafka-protocol` crate (which
//! follows Kafka 4.0, KIP-896) no longer carries, and what this codec does with each. This table
//! is the one place that says so: [`super::versions::codec_range`] widens an API's range by the
//! versions served here, and the codec decodes and encodes by what it says.
//!
//! Every legacy version is non-flexible (they all predate KIP-482), so their requests carry
//! request header v1 and their responses response header v0.
//!
//! Not listed, so such a request still closes its connection (logged): WriteTxnMarkers v0 and
//! AlterPartition v0–1, which only brokers and controllers send to each other, and the
//! ZooKeeper-era inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
//! ControlledShutdown) whose keys the crate does not know at all.

use kafka_protocol::messages::ApiKey;

/// What the codec does with a legacy version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Legacy {
    /// Decoded by hand into the crate's request struct and answered by the API's handler, with
    /// the response encoded by hand (or by the crate at a version of identical layout).
    Served,
    /// Decoded by hand only far enough to name each item (topic, partition, ACL), so the
    /// UNSUPPORTED_VERSION answer names them too: a client that does not check ApiVersions reads
    /// it as an error, not as a response missing what it asked for.
    Refused,
    /// Byte for byte the same request and response as the given version (Kafka's definitions say
    /// "Version 1 is the same as version 0"): the crate decodes and encodes it there. Refused.
    SameAs(i16),
}

/// One row: `api_key` at `min_version..=max_version` is handled as `how`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyRange {
    pub api_key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    pub how: Legacy,
}

const fn row(api_key: ApiKey, min_version: i16, max_version: i16, how: Legacy) -> LegacyRange {
    LegacyRange {
        api_key,
        min_version,
        max_version,
        how,
    }
}

/// Every legacy version, in api-key order. Each lies below the crate's range for its API.
pub const LEGACY: &[LegacyRange] = &[
    row(ApiKey::Produce, 0, 2, Legacy::Refused),
    row(ApiKey::Fetch, 0, 3, Legacy::Refused),
    row(ApiKey::ListOffsets, 0, 0, Legacy::Refused),
    row(ApiKey::OffsetCommit, 0, 1, Legacy::Served),
    row(ApiKey::OffsetFetch, 0, 0, Legacy::Served),
    row(ApiKey::CreateTopics, 0, 1, Legacy::Refused),
    row(ApiKey::DeleteTopics, 0, 0, Legacy::Refused),
    row(ApiKey::OffsetForLeaderEpoch, 0, 1, Legacy::Refused),
    row(ApiKey::DescribeAcls, 0, 0, Legacy::Refused),
    row(ApiKey::CreateAcls, 0, 0, Legacy::Refused),
    row(ApiKey::DeleteAcls, 0, 0, Legacy::Refused),
    row(ApiKey::DescribeConfigs, 0, 0, Legacy::Served),
    row(ApiKey::AlterReplicaLogDirs, 0, 0, Legacy::SameAs(1)),
    row(ApiKey::DescribeLogDirs, 0, 0, Legacy::SameAs(1)),
    row(ApiKey::CreateDelegationToken, 0, 0, Legacy::SameAs(1)),
    row(ApiKey::RenewDelegationToken, 0, 0, Legacy::SameAs(1)),
    row(ApiKey::ExpireDelegationToken, 0, 0, Legacy::SameAs(1)),
    row(ApiKey::DescribeDelegationToken, 0, 0, Legacy::SameAs(1)),
];

/// How `api_key` at `version` is handled, when it is a legacy version.
pub fn legacy(api_key: ApiKey, version: i16) -> Option<Legacy> {
    LEGACY
        .iter()
        .find(|r| r.api_key == api_key && (r.min_version..=r.max_version).contains(&version))
        .map(|r| r.how)
}

/// The lowest version of `api_key` served by hand, when it has one; the served legacy versions
/// of an API reach up to the crate's minimum.
pub fn served_min(api_key: ApiKey) -> Option<i16> {
    LEGACY
        .iter()
        .filter(|r| r.api_key == api_key && r.how == Legacy::Served)
        .map(|r| r.min_version)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_lies_just_below_the_crates_range_in_key_order() {
        for r in LEGACY {
            let crate_min = r.api_key.valid_versions().min;
            assert!(r.min_version <= r.max_version, "{r:?}");
            assert!(
                r.max_version < crate_min,
                "{r:?} vs the crate's {crate_min}"
            );
            if r.how == Legacy::Served {
                // codec_range joins the two: no gap between them.
                assert_eq!(r.max_version + 1, crate_min, "{r:?}");
            }
            if let Legacy::SameAs(v) = r.how {
                assert_eq!(v, crate_min, "{r:?}");
            }
        }
        for w in LEGACY.windows(2) {
            assert!((w[0].api_key as i16) < (w[1].api_key as i16), "{w:?}");
        }
        assert_eq!(legacy(ApiKey::OffsetCommit, 1), Some(Legacy::Served));
        assert_eq!(legacy(ApiKey::OffsetCommit, 2), None);
        assert_eq!(legacy(ApiKey::Produce, 2), Some(Legacy::Refused));
        assert_eq!(served_min(ApiKey::OffsetCommit), Some(0));
        assert_eq!(served_min(ApiKey::Produce), None);
    }
}
