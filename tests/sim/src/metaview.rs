//! [`MetaView`]: what a broker knows of the committed metadata — each partition's replicas,
//! ISR, leader and epochs, and each broker's status — as one controller node's applied image
//! had it when it answered a heartbeat (standing in for the broker following the metadata log).
//!
//! Owns: [`PartKey`] (a partition by topic id, so a deleted and recreated topic is another
//! partition) and the conversion from a [`MetadataImage`].
//! Promises: built only from an applied (committed) image; `offset` is that image's applied
//! index, so a broker can keep the newest view it was sent.
//! Never does: decide anything.

use std::collections::BTreeMap;

use spool_core::isr_change::BrokerStatus;
use spool_core::replica::Leadership;
use spool_core::topic_config::TopicDefaults;
use spool_raft::image::PartitionState;
use spool_raft::{MetadataImage, TopicId};

/// One partition of one topic incarnation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartKey {
    pub topic_id: TopicId,
    pub partition: i32,
}

impl std::fmt::Display for PartKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:x}/{}", self.topic_id.low & 0xffff, self.partition)
    }
}

#[derive(Debug, Clone)]
pub struct PartView {
    pub state: PartitionState,
    pub min_insync_replicas: usize,
}

impl PartView {
    pub fn leadership(&self) -> Leadership {
        Leadership {
            leader_id: self.state.leader,
            leader_epoch: self.state.leader_epoch,
            partition_epoch: self.state.partition_epoch,
            replicas: self.state.replicas.clone(),
            isr: self.state.isr.clone(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct MetaView {
    pub offset: i64,
    pub partitions: BTreeMap<PartKey, PartView>,
    pub brokers: BTreeMap<i32, BrokerStatus>,
}

impl MetaView {
    pub fn from_image(image: &MetadataImage, offset: i64) -> Self {
        let defaults = TopicDefaults::default();
        let mut partitions = BTreeMap::new();
        for t in image.topics() {
            let min_isr = t.config.resolve(&defaults).min_insync_replicas as usize;
            for (i, p) in (0..).zip(&t.partitions) {
                partitions.insert(
                    PartKey {
                        topic_id: t.topic_id,
                        partition: i,
                    },
                    PartView {
                        state: p.clone(),
                        min_insync_replicas: min_isr,
                    },
                );
            }
        }
        let brokers = image
            .brokers()
            .map(|b| (b.broker_id, broker_status(b)))
            .collect();
        MetaView {
            offset,
            partitions,
            brokers,
        }
    }

    pub fn broker_epochs(&self) -> BTreeMap<i32, i64> {
        self.brokers
            .iter()
            .map(|(id, s)| (*id, s.broker_epoch))
            .collect()
    }
}

pub fn broker_status(b: &spool_raft::image::BrokerRegistration) -> BrokerStatus {
    BrokerStatus {
        broker_epoch: b.broker_epoch,
        fenced: b.fenced,
        in_controlled_shutdown: b.in_controlled_shutdown,
        // The metadata log has no unclean-shutdown mark yet (election.rs's KIP-966 note).
        unclean_shutdown: false,
    }
}
