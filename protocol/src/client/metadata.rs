//! The client's cluster metadata cache: brokers, and each topic's partitions with their leaders.
//!
//! It decides *when* to refresh; the core that owns it sends the Metadata request. A refresh is
//! due when asked for (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, a lost connection, a
//! topic not yet known) or when the data is older than `max_age_ms`; refreshes are at least
//! `refresh_backoff_ms` apart and one at a time. Requests go to a known broker when there is one,
//! else to the bootstrap list, rotating so one dead broker cannot wedge the client.

use std::collections::{BTreeSet, HashMap};

use crate::client::types::TopicMap;

use crate::client::net::Addr;
use crate::wire::{MetadataRequestT, MetadataResponseT};
use crate::ErrorCode;

/// One partition as the metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMeta {
    pub partition: i32,
    pub error: ErrorCode,
    /// -1 when there is no leader.
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas on brokers that are fenced or not registered (Kafka Metadata v5+).
    pub offline_replicas: Vec<i32>,
    /// KIP-966's eligible leader replicas (outside the ISR, each holding every committed record).
    pub eligible_leaders: Vec<i32>,
}

/// One topic as the metadata describes it; partitions sorted by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub error: ErrorCode,
    pub is_internal: bool,
    pub partitions: Vec<PartitionMeta>,
}

#[derive(Debug)]
pub struct MetadataCache {
    bootstrap: Vec<Addr>,
    brokers: HashMap<i32, Addr>,
    topics: TopicMap<String, TopicMeta>,
    /// Per topic, its partitions that have a leader, ascending: computed once per answer, as
    /// the producer's sticky partitioner asks for them on every keyless record.
    available: TopicMap<String, Vec<i32>>,
    /// Topics the last answer about them called UNKNOWN_TOPIC_OR_PARTITION, so an owner that
    /// gives up waiting can say why (Kafka's producer does: "topic not present in metadata").
    unknown: BTreeSet<String>,
    /// Topics the owner cares about; a refresh asks for exactly these.
    wanted: BTreeSet<String>,
    refresh_requested: bool,
    in_flight: bool,
    last_attempt_ms: Option<u64>,
    last_success_ms: Option<u64>,
    refresh_backoff_ms: u64,
    max_age_ms: u64,
    rotation: usize,
    /// Bumped on every successful update, so owners can notice changes cheaply.
    version: u64,
}

impl MetadataCache {
    pub fn new(bootstrap: Vec<Addr>, refresh_backoff_ms: u64, max_age_ms: u64) -> Self {
        Self {
            bootstrap,
            brokers: HashMap::new(),
            topics: TopicMap::default(),
            available: TopicMap::default(),
            unknown: BTreeSet::new(),
            wanted: BTreeSet::new(),
            refresh_requested: false,
            in_flight: false,
            last_attempt_ms: None,
            last_success_ms: None,
            refresh_backoff_ms,
            max_age_ms,
            rotation: 0,
            version: 0,
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Starts tracking `topic`; asks for a refresh if it is not known yet.
    pub fn want_topic(&mut self, topic: &str) {
        // Called per record: a topic already wanted costs a lookup, not a `String`.
        if self.wanted.contains(topic) {
            return;
        }
        self.wanted.insert(topic.to_owned());
        if !self.topics.contains_key(topic) {
            self.refresh_requested = true;
        }
    }

    /// Asks for a refresh at the next opportunity (stale leader, unknown topic, lost broker).
    pub fn request_refresh(&mut self) {
        self.refresh_requested = true;
    }

    pub fn refresh_requested(&self) -> bool {
        self.refresh_requested
    }

    /// Whether a Metadata request should go out now.
    pub fn refresh_due(&self, now_ms: u64) -> bool {
        if self.in_flight {
            return false;
        }
        let stale = match self.last_success_ms {
            None => true,
            Some(t) => now_ms.saturating_sub(t) >= self.max_age_ms,
        };
        if !(self.refresh_requested || stale) {
            return false;
        }
        match self.last_attempt_ms {
            Some(t) => now_ms >= t + self.refresh_backoff_ms,
            None => true,
        }
    }

    /// When a requested refresh becomes due (for the owner's wake-up time).
    pub fn next_refresh_ms(&self) -> Option<u64> {
        if self.in_flight {
            return None;
        }
        let due_by_request = if self.refresh_requested || self.last_success_ms.is_none() {
            Some(
                self.last_attempt_ms
                    .map_or(0, |t| t + self.refresh_backoff_ms),
            )
        } else {
            None
        };
        let due_by_age = self.last_success_ms.map(|t| t + self.max_age_ms);
        crate::client::net::earliest([due_by_request, due_by_age])
    }

    /// Marks a refresh as sent and builds its request. `all_topics` asks for every topic (admin).
    pub fn begin_refresh(&mut self, now_ms: u64, all_topics: bool) -> MetadataRequestT {
        self.in_flight = true;
        // Cleared now, not when the answer comes: a refresh asked for while this one is in flight
        // (a topic wanted since, a leader moved since) must not be satisfied by this older request.
        self.refresh_requested = false;
        self.last_attempt_ms = Some(now_ms);
        let mut r = MetadataRequestT::default();
        r.topics = if all_topics {
            None
        } else {
            Some(self.wanted.iter().cloned().collect())
        };
        r.allow_auto_topic_creation = false;
        r
    }

    /// The refresh failed (connection lost, timeout); it will be retried after the backoff.
    pub fn refresh_failed(&mut self) {
        self.in_flight = false;
        self.refresh_requested = true;
    }

    /// Applies a Metadata response.
    pub fn update(&mut self, resp: &MetadataResponseT, now_ms: u64) {
        self.in_flight = false;
        self.last_success_ms = Some(now_ms);
        self.version += 1;
        if let Some(brokers) = &resp.brokers {
            self.brokers = brokers
                .iter()
                .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
                .collect();
        }
        for t in resp.topics.iter().flatten() {
            let error = ErrorCode::from(t.error_code);
            if error == ErrorCode::UnknownTopicOrPartition {
                self.topics.remove(&t.name);
                self.available.remove(&t.name);
                self.unknown.insert(t.name.clone());
                // Keep asking while someone wants it (it may be being created).
                if self.wanted.contains(&t.name) {
                    self.refresh_requested = true;
                }
                continue;
            }
            self.unknown.remove(&t.name);
            let mut partitions: Vec<PartitionMeta> = t
                .partitions
                .iter()
                .flatten()
                .map(|p| PartitionMeta {
                    partition: p.partition_index,
                    error: ErrorCode::from(p.error_code),
                    leader_id: p.leader_id,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.clone().unwrap_or_default(),
                    isr: p.isr_nodes.clone().unwrap_or_default(),
                    offline_replicas: p.offline_replicas.clone().unwrap_or_default(),
                    eligible_leaders: p.eligible_leaders.clone().unwrap_or_default(),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            if partitions.iter().any(|p| p.leader_id < 0) || error != ErrorCode::None {
                // Leader election in progress: come back soon.
                self.refresh_requested = true;
            }
            let led = partitions
                .iter()
                .filter(|p| p.leader_id >= 0)
                .map(|p| p.partition)
                .collect();
            self.available.insert(t.name.clone(), led);
            self.topics.insert(
                t.name.clone(),
                TopicMeta {
                    name: t.name.clone(),
                    error,
                    is_internal: t.is_internal,
                    partitions,
                },
            );
        }
    }

    /// Why `topic` has no usable metadata, as the last answer about it said: UNKNOWN_TOPIC_OR_PARTITION,
    /// or the topic's own error (TOPIC_AUTHORIZATION_FAILED, LEADER_NOT_AVAILABLE, …). `None`
    /// when no broker answered about it, or it answered without an error.
    pub fn topic_error(&self, topic: &str) -> Option<ErrorCode> {
        if self.unknown.contains(topic) {
            return Some(ErrorCode::UnknownTopicOrPartition);
        }
        self.topics
            .get(topic)
            .map(|t| t.error)
            .filter(|e| *e != ErrorCode::None)
    }

    pub fn topic(&self, topic: &str) -> Option<&TopicMeta> {
        self.topics.get(topic)
    }

    pub fn topics(&self) -> impl Iterator<Item = &TopicMeta> {
        self.topics.values()
    }

    pub fn partition_count(&self, topic: &str) -> Option<usize> {
        self.topics
            .get(topic)
            .map(|t| t.partitions.len())
            .filter(|n| *n > 0)
    }

    /// Partitions of `topic` that have a leader.
    pub fn available_partitions(&self, topic: &str) -> &[i32] {
        self.available.get(topic).map_or(&[], Vec::as_slice)
    }

    /// The leader's id and address, when known.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<(i32, Addr)> {
        let t = self.topics.get(topic)?;
        let p = t.partitions.iter().find(|p| p.partition == partition)?;
        let addr = self.brokers.get(&p.leader_id)?;
        Some((p.leader_id, addr.clone()))
    }

    /// A broker to send a partition-less request (metadata, admin) to: known brokers first, then
    /// the bootstrap list, rotating on every call.
    pub fn any_broker(&mut self) -> Option<Addr> {
        let mut known: Vec<&Addr> = self.brokers.values().collect();
        known.sort();
        let pool: Vec<Addr> = if known.is_empty() {
            self.bootstrap.clone()
        } else {
            known
                .into_iter()
                .cloned()
                .chain(self.bootstrap.iter().cloned())
                .collect()
        };
        if pool.is_empty() {
            return None;
        }
        self.rotation = self.rotation.wrapping_add(1);
        Some(pool[self.rotation % pool.len()].clone())
    }

    /// Whether `addr` is a broker (or bootstrap) this cache knows.
    pub fn knows_addr(&self, addr: &str) -> bool {
        self.brokers.values().any(|a| a == addr) || self.bootstrap.iter().any(|a| a == addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{MetadataBrokerT, MetadataPartitionT, MetadataTopicT};

    fn response(leader: i32) -> MetadataResponseT {
        let mut r = MetadataResponseT::default();
        r.brokers = Some(vec![
            MetadataBrokerT {
                node_id: 1,
                host: "h1".into(),
                port: 1,
                rack: None,
                broker_epoch: 1,
                fenced: false,
            },
            MetadataBrokerT {
                node_id: 2,
                host: "h2".into(),
                port: 2,
                rack: None,
                broker_epoch: 2,
                fenced: false,
            },
        ]);
        let mut p = MetadataPartitionT::default();
        p.partition_index = 0;
        p.leader_id = leader;
        let mut t = MetadataTopicT::default();
        t.name = "t".into();
        t.partitions = Some(vec![p]);
        r.topics = Some(vec![t]);
        r
    }

    #[test]
    fn refresh_cycle() {
        let mut m = MetadataCache::new(vec!["boot:9093".into()], 100, 300_000);
        assert!(m.refresh_due(0), "nothing known yet");
        m.want_topic("t");
        let req = m.begin_refresh(0, false);
        assert_eq!(req.topics, Some(vec!["t".to_owned()]));
        assert!(!m.refresh_due(1000), "one at a time");
        m.update(&response(1), 10);
        assert_eq!(m.leader("t", 0), Some((1, "h1:1".to_owned())));
        assert!(!m.refresh_due(20));
        m.request_refresh();
        assert!(!m.refresh_due(20), "backoff from the last attempt");
        assert!(m.refresh_due(100));
        let _ = m.begin_refresh(100, false);
        m.update(&response(2), 110);
        assert_eq!(m.leader("t", 0), Some((2, "h2:2".to_owned())));
        assert!(m.refresh_due(110 + 300_000), "max age");
    }

    #[test]
    fn a_refresh_asked_for_mid_flight_is_not_lost() {
        let mut m = MetadataCache::new(vec!["boot:9093".into()], 0, 300_000);
        let _ = m.begin_refresh(0, false);
        m.want_topic("t"); // after the request was built: it does not ask for "t"
        m.update(&MetadataResponseT::default(), 1);
        assert!(m.refresh_due(1), "the wanted topic still needs a refresh");
        assert_eq!(m.begin_refresh(1, false).topics, Some(vec!["t".to_owned()]));
    }

    #[test]
    fn leaderless_partition_keeps_refreshing() {
        let mut m = MetadataCache::new(vec!["boot:9093".into()], 100, 300_000);
        let _ = m.begin_refresh(0, false);
        m.update(&response(-1), 0);
        assert_eq!(m.leader("t", 0), None);
        assert!(m.refresh_requested());
        assert!(m.available_partitions("t").is_empty());
    }
}
