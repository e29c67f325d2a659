//! Replication liveness: after the faults stop and the quiet window passes, every partition has
//! a leader that acts as one, its ISR is all its replicas, and every batch acknowledged with
//! acks=all is readable from that leader (below its HW).
//!
//! Owns: [`check`], run once at the end, after [`crate::liveness`] (which already demands one
//! metadata leader and agreeing images).
//! Promises: judges against the metadata leader's committed image; topics deleted during the
//! run are not judged, nor (in a run where a broker lost its disk) partitions whose ISR is empty
//! because their last member's log was lost.
//! Never does: wait or retry.

use std::collections::BTreeMap;

use crate::metaview::PartKey;
use crate::node::SimNode;
use crate::plog::SimBatch;
use crate::replica_host::ReplicaHost;
use crate::violation::{Violation, LIVENESS};

pub fn check(
    nodes: &[SimNode],
    hosts: &[ReplicaHost],
    acked_all: &BTreeMap<PartKey, Vec<SimBatch>>,
    quiet_ms: u64,
    wiped: bool,
) -> Result<(), Violation> {
    let fail = |why: String| {
        Err(Violation::new(
            LIVENESS,
            format!("{quiet_ms} ms after the faults stopped: {why}"),
        ))
    };
    let Some(image) = nodes
        .iter()
        .filter_map(|n| n.raft())
        .find(|r| r.is_leader())
        .map(|r| r.image())
    else {
        return Ok(());
    };
    for topic in image.topics() {
        for (i, p) in (0..).zip(&topic.partitions) {
            let key = PartKey {
                topic_id: topic.topic_id,
                partition: i,
            };
            if wiped && p.isr.is_empty() {
                // Its last ISR member lost its disk: nothing may lead it without losing what
                // was acknowledged, so it stays unavailable (`crate::liveness`).
                continue;
            }
            let mut isr = p.isr.clone();
            let mut replicas = p.replicas.clone();
            isr.sort_unstable();
            replicas.sort_unstable();
            if isr != replicas {
                return fail(format!(
                    "{}/{i} ({key}) ISR {:?} is not its replicas {:?}",
                    topic.name, p.isr, p.replicas
                ));
            }
            let leader = usize::try_from(p.leader - 1)
                .ok()
                .and_then(|i| hosts.get(i))
                .and_then(|h| h.replicas().get(&key))
                .and_then(|r| r.leader().map(|l| (r, l)));
            let Some((r, l)) = leader.filter(|(_, l)| l.state.leader_epoch() == p.leader_epoch)
            else {
                return fail(format!(
                    "{}/{i} ({key}): b{} does not act as leader at epoch {}",
                    topic.name, p.leader, p.leader_epoch
                ));
            };
            let hw = l.state.high_watermark();
            for a in acked_all.get(&key).into_iter().flatten() {
                if r.log.batch_at(a.base_offset) != Some(a) || a.end_offset() > hw {
                    return fail(format!(
                        "{}/{i} ({key}): acked batch {} at {} not readable from b{} (HW {hw})",
                        topic.name, a.id, a.base_offset, p.leader
                    ));
                }
            }
        }
    }
    Ok(())
}
