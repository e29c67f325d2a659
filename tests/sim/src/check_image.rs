//! The metadata state machine's properties, checked on every node's committed image.
//!
//! Owns: the digest of the image at every applied index any node reached, each node's previous
//! view of every partition (reset when the node restarts), and the leader named at every
//! `(topic id, partition, leader epoch)`.
//! Promises (each a named [`Violation`]), checked whenever a node's applied index moves or it
//! restarts:
//! - `applied-image-agrees`: nodes that applied the same index hold equal images (the image is a
//!   function of the committed prefix, snapshots included);
//! - `epochs-monotonic`: on a node, a partition's leader epoch and partition epoch never
//!   decrease, and its state never changes without a partition-epoch bump;
//! - `one-leader-per-leader-epoch`: one `(partition, leader epoch)` names one leader, on every
//!   node and across time;
//! - `isr-subset-of-replicas-and-holds-leader`: the ISR is non-empty, within the replicas, and
//!   holds the leader when there is one;
//! - `no-fenced-leader`: a partition's leader is a registered, unfenced broker.
//!
//! Never does: change a node.

use std::collections::{BTreeMap, HashMap};

use spool_raft::image::{PartitionState, NO_LEADER};
use spool_raft::{MetadataImage, MetadataRaft, TopicId};

use crate::trace::hash_bytes;
use crate::violation::{
    Violation, EPOCHS_MONOTONIC, FENCED_LEADS_NOTHING, IMAGE_AGREES, ISR_SUBSET,
    ONE_LEADER_PER_EPOCH,
};

type PartitionKey = (TopicId, i32);

#[derive(Default)]
struct NodeView {
    /// `(starts, applied index)` when last checked.
    at: (u64, u64),
    partitions: HashMap<PartitionKey, PartitionState>,
}

#[derive(Default)]
pub struct ImageChecks {
    digests: HashMap<u64, (u64, u64)>,
    leaders: HashMap<(TopicId, i32, i32), i32>,
    views: BTreeMap<u64, NodeView>,
}

/// A digest of everything the image holds (its `Debug` form walks every ordered map).
pub fn image_digest(image: &MetadataImage) -> u64 {
    hash_bytes(format!("{image:?}").as_bytes())
}

impl ImageChecks {
    pub fn check_node(
        &mut self,
        node: u64,
        starts: u64,
        raft: &MetadataRaft,
    ) -> Result<(), Violation> {
        let applied = raft.applied_index();
        let view = self.views.entry(node).or_default();
        if view.at == (starts, applied) {
            return Ok(());
        }
        if view.at.0 != starts {
            // Restarted: its image was rebuilt from disk, possibly at an earlier index.
            view.partitions.clear();
        }
        view.at = (starts, applied);
        let image = raft.image();
        let digest = image_digest(image);
        let (first_node, seen) = *self.digests.entry(applied).or_insert((node, digest));
        if seen != digest {
            return Err(Violation::new(
                IMAGE_AGREES,
                format!(
                    "n{node} and n{first_node} applied index {applied} but hold different images"
                ),
            ));
        }
        for topic in image.topics() {
            for (index, p) in (0..).zip(&topic.partitions) {
                let at = format!("n{node} {}/{index} at applied {applied}", topic.name);
                check_partition(image, p, &at)?;
                let key = (topic.topic_id, index);
                if let Some(before) = view.partitions.get(&key) {
                    if p.leader_epoch < before.leader_epoch
                        || p.partition_epoch < before.partition_epoch
                    {
                        return Err(Violation::new(
                            EPOCHS_MONOTONIC,
                            format!("{at}: epochs went from {before:?} to {p:?}"),
                        ));
                    }
                    if p.partition_epoch == before.partition_epoch && p != before {
                        return Err(Violation::new(
                            EPOCHS_MONOTONIC,
                            format!(
                                "{at}: changed without a partition epoch bump: {before:?} -> {p:?}"
                            ),
                        ));
                    }
                }
                let leader = *self
                    .leaders
                    .entry((topic.topic_id, index, p.leader_epoch))
                    .or_insert(p.leader);
                if leader != p.leader {
                    return Err(Violation::new(
                        ONE_LEADER_PER_EPOCH,
                        format!(
                            "{at}: leader epoch {} names leader {} here and {leader} elsewhere",
                            p.leader_epoch, p.leader
                        ),
                    ));
                }
                view.partitions.insert(key, p.clone());
            }
        }
        Ok(())
    }
}

fn check_partition(image: &MetadataImage, p: &PartitionState, at: &str) -> Result<(), Violation> {
    // Empty only when its last member lost its log, and then nobody leads.
    let isr_ok = (!p.isr.is_empty() || p.leader == NO_LEADER)
        && p.isr.iter().all(|b| p.replicas.contains(b))
        && (p.leader == NO_LEADER || p.isr.contains(&p.leader));
    if !isr_ok {
        return Err(Violation::new(
            ISR_SUBSET,
            format!(
                "{at}: replicas={:?} isr={:?} leader={}",
                p.replicas, p.isr, p.leader
            ),
        ));
    }
    if p.leader != NO_LEADER {
        match image.broker(p.leader) {
            Some(b) if !b.fenced => {}
            Some(b) => {
                return Err(Violation::new(
                    FENCED_LEADS_NOTHING,
                    format!(
                        "{at}: leader {} is fenced (broker epoch {}), leader epoch {}",
                        p.leader, b.broker_epoch, p.leader_epoch
                    ),
                ))
            }
            None => {
                return Err(Violation::new(
                    FENCED_LEADS_NOTHING,
                    format!("{at}: leader {} is not registered", p.leader),
                ))
            }
        }
    }
    Ok(())
}
