//! Which topics a group's members are subscribed to, read from their JoinGroup protocol metadata
//! (Kafka's `ConsumerProtocolSubscription`), for OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC.
//!
//! As Kafka's coordinator does (`ClassicGroup.computeSubscribedTopics`), only groups of protocol
//! type `consumer` are read, and only the prefix every version shares (v0: an `i16` version, the
//! topics array, the user data), so a newer client's subscription reads as well. When the
//! subscriptions cannot be known (no protocol chosen yet, or metadata that does not parse), a
//! consumer group counts as subscribed to every topic: an offset is never deleted under a member
//! that may be reading it. Decoding never panics and allocates at most what the bytes hold.

use std::collections::BTreeSet;

use super::state::Group;

/// The JoinGroup protocol type of Kafka consumers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The topics of one member's subscription, or `None` when the bytes are not a subscription.
pub fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut c = metadata;
    let version = i16::from_be_bytes(take(&mut c, 2)?.try_into().ok()?);
    if version < 0 {
        return None;
    }
    let n = i32::from_be_bytes(take(&mut c, 4)?.try_into().ok()?);
    // Each topic takes at least its 2-byte length: a count the bytes cannot hold is malformed.
    let n = usize::try_from(n).ok().filter(|n| n * 2 <= c.len())?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let len = i16::from_be_bytes(take(&mut c, 2)?.try_into().ok()?);
        let bytes = take(&mut c, usize::try_from(len).ok()?)?;
        topics.push(String::from_utf8(bytes.to_vec()).ok()?);
    }
    // User data (nullable bytes) ends v0; Kafka's reader fails when it is cut short.
    let len = i32::from_be_bytes(take(&mut c, 4)?.try_into().ok()?);
    if len < -1 {
        return None;
    }
    if len > 0 {
        take(&mut c, len as usize)?;
    }
    Some(topics)
}

fn take<'a>(c: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if c.len() < n {
        return None;
    }
    let (head, rest) = c.split_at(n);
    *c = rest;
    Some(head)
}

impl Group {
    /// Kafka's `computeSubscribedTopics`: the union of the members' subscribed topics; `None`
    /// when the group is not a consumer group or its subscriptions cannot be read.
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol.as_deref()?;
        let mut all = BTreeSet::new();
        for m in self.members.values() {
            all.extend(subscription_topics(&m.metadata_for(Some(protocol)))?);
        }
        Some(all)
    }

    /// Kafka's `isSubscribedToTopic`, given [`Group::subscribed_topics`]'s answer.
    pub fn is_subscribed_to(&self, subscribed: Option<&BTreeSet<String>>, topic: &str) -> bool {
        match subscribed {
            Some(topics) => topics.contains(topic),
            None => self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// ConsumerProtocolSubscription at `version` (v0 fields; later versions append theirs).
    pub(crate) fn encode(version: i16, topics: &[&str], tail: &[u8]) -> Vec<u8> {
        let mut out = version.to_be_bytes().to_vec();
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for t in topics {
            out.extend_from_slice(&(t.len() as i16).to_be_bytes());
            out.extend_from_slice(t.as_bytes());
        }
        out.extend_from_slice(&(-1i32).to_be_bytes());
        out.extend_from_slice(tail);
        out
    }

    #[test]
    fn reads_the_topics_of_every_version() {
        assert_eq!(
            subscription_topics(&encode(0, &["a", "bb"], &[])),
            Some(vec!["a".to_string(), "bb".to_string()])
        );
        // v1+ append owned partitions (and more): the shared prefix is what counts.
        assert_eq!(
            subscription_topics(&encode(3, &["t"], &[0, 0, 0, 0, 0, 0, 0, 1])),
            Some(vec!["t".to_string()])
        );
        // User data present.
        let mut b = encode(0, &["t"], &[]);
        let cut = b.len() - 4;
        b.truncate(cut);
        b.extend_from_slice(&3i32.to_be_bytes());
        b.extend_from_slice(b"xyz");
        assert_eq!(subscription_topics(&b), Some(vec!["t".to_string()]));
    }

    #[test]
    fn malformed_metadata_is_none() {
        assert_eq!(subscription_topics(&[]), None);
        assert_eq!(subscription_topics(&encode(-1, &["t"], &[])), None);
        let b = encode(0, &["topic"], &[]);
        for cut in 0..b.len() {
            assert_eq!(subscription_topics(&b[..cut]), None, "cut at {cut}");
        }
        // A count far beyond the bytes.
        assert_eq!(subscription_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]), None);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = subscription_topics(&b);
        }
    }
}
