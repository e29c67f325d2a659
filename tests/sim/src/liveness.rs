//! The liveness check: after every fault has been undone and the cluster has had a bounded
//! quiet time, it must have recovered.
//!
//! Owns: [`check`], run once at the end of the quiet window.
//! Promises: reports `liveness` unless all of these hold: every node is up; exactly one of them
//! leads, in the highest term, and every node names it as leader; every node applied the same
//! index and holds an equal image; every broker is registered in that image at the epoch it was
//! given, unfenced; every partition has a leader.
//! Never does: wait or retry (the world decides how long the quiet window is).

use spool_raft::image::NO_LEADER;

use crate::broker::SimBroker;
use crate::check_image::image_digest;
use crate::node::{Life, SimNode};
use crate::violation::{Violation, LIVENESS};

/// `wiped`: a broker lost its disk in the run, so a partition whose last ISR member it was may
/// be left with an empty ISR and no leader (`spool_core::election::forget_lost_log`).
pub fn check(
    nodes: &[SimNode],
    brokers: &[SimBroker],
    quiet_ms: u64,
    wiped: bool,
) -> Result<(), Violation> {
    let fail = |why: String| {
        Err(Violation::new(
            LIVENESS,
            format!("{quiet_ms} ms after the faults stopped: {why}"),
        ))
    };
    let mut rafts = Vec::new();
    for n in nodes {
        match (n.life(), n.raft()) {
            (Life::Up, Some(r)) => rafts.push((n.id(), r)),
            _ => return fail(format!("n{} is not up ({:?})", n.id(), n.life())),
        }
    }
    let leaders: Vec<u64> = rafts
        .iter()
        .filter(|(_, r)| r.is_leader())
        .map(|(id, _)| *id)
        .collect();
    let [leader] = leaders[..] else {
        return fail(format!("leaders: {leaders:?}"));
    };
    let (_, lr) = rafts
        .iter()
        .find(|(id, _)| *id == leader)
        .expect("the leader is a node");
    for (id, r) in &rafts {
        if r.leader_id() != leader || r.term() != lr.term() {
            return fail(format!(
                "n{id} names leader {} in term {}, n{leader} leads term {}",
                r.leader_id(),
                r.term(),
                lr.term()
            ));
        }
        if r.applied_index() != lr.applied_index()
            || image_digest(r.image()) != image_digest(lr.image())
        {
            return fail(format!(
                "n{id} applied {} but the leader applied {} (or their images differ)",
                r.applied_index(),
                lr.applied_index()
            ));
        }
    }
    let image = lr.image();
    for b in brokers {
        let registered = image.broker(b.id());
        match (b.epoch(), registered) {
            (Some(e), Some(r)) if r.broker_epoch == e && !r.fenced => {}
            _ => {
                return fail(format!(
                    "broker {} (epoch {:?}) is {:?} in the image",
                    b.id(),
                    b.epoch(),
                    registered.map(|r| (r.broker_epoch, r.fenced))
                ))
            }
        }
    }
    for topic in image.topics() {
        for (i, p) in topic.partitions.iter().enumerate() {
            if p.leader == NO_LEADER && !(wiped && p.isr.is_empty()) {
                return fail(format!(
                    "{}/{i} has no leader (isr {:?})",
                    topic.name, p.isr
                ));
            }
        }
    }
    Ok(())
}
