//! The controller's and the metadata image's gauges for `/metrics` (DESIGN §10), from core 0: is
//! this node the active controller, its raft term and commit index, the metadata offset applied
//! here, brokers whose latest registration followed an unclean shutdown, the quorum's voters and learners (and whether this node is one), snapshots installed
//! from the leader, controlled shutdowns this node let through as the active controller, registered and fenced brokers, leaderless, under-replicated and under-min-ISR partitions
//! and replicas on fenced brokers, and a digest of the image — equal on every broker once
//! they have applied the same log, which is how a test (or an operator) sees that they agree.

use spool_core::topic_config::TopicDefaults;
use spool_raft::MetadataImage;

use crate::controller::Controller;

/// CRC-32C over the image's records in their canonical order (brokers, topics by name, the
/// producer-id block), as a snapshot would write them.
pub fn image_digest(image: &MetadataImage) -> u32 {
    let mut crc = 0u32;
    for r in spool_raft::image_snapshot::image_records(image) {
        match spool_protocol::metadata_log::encode(&r) {
            Ok(bytes) => crc = crc32c::crc32c_append(crc, &bytes),
            Err(e) => tracing::error!("encoding an image record for its digest: {e}"),
        }
    }
    crc
}

/// Prometheus lines for this node's controller and image.
pub fn render(
    image: &MetadataImage,
    defaults: &TopicDefaults,
    controller: Option<&Controller>,
) -> String {
    let mut out = String::new();
    let brokers = image.brokers().count();
    let fenced = image.brokers().filter(|b| b.fenced).count();
    out.push_str(&format!(
        "spool_metadata_image_digest {}\n",
        image_digest(image)
    ));
    out.push_str(&format!("spool_metadata_topics {}\n", image.topic_count()));
    out.push_str(&format!("spool_registered_brokers {brokers}\n"));
    out.push_str(&format!("spool_fenced_brokers {fenced}\n"));
    let unclean = image.brokers().filter(|b| b.unclean_shutdown).count();
    out.push_str(&format!("spool_unclean_shutdown_brokers {unclean}\n"));
    let (mut leaderless, mut under_replicated, mut under_min_isr, mut offline_replicas) =
        (0u64, 0u64, 0u64, 0u64);
    let mut eligible_leaders = 0u64;
    for t in image.topics() {
        let required = t.config.resolve(defaults);
        for p in &t.partitions {
            if p.leader < 0 {
                leaderless += 1;
            }
            if p.isr.len() < p.replicas.len() {
                under_replicated += 1;
            }
            if p.isr.len() < required.required_isr(p.replicas.len()) {
                under_min_isr += 1;
            }
            eligible_leaders += p.eligible_leaders.len() as u64;
            offline_replicas += p
                .replicas
                .iter()
                .filter(|r| image.broker(**r).is_none_or(|b| b.fenced))
                .count() as u64;
        }
    }
    out.push_str(&format!("spool_leaderless_partitions {leaderless}\n"));
    out.push_str(&format!(
        "spool_under_replicated_partitions {under_replicated}\n"
    ));
    out.push_str(&format!("spool_under_min_isr_partitions {under_min_isr}\n"));
    out.push_str(&format!("spool_offline_replicas {offline_replicas}\n"));
    out.push_str(&format!(
        "spool_eligible_leader_replicas {eligible_leaders}\n"
    ));
    let status = controller.and_then(|c| c.status.borrow().clone());
    if let (Some(c), Some(s)) = (controller, status) {
        out.push_str(&format!(
            "spool_controller_active {}\n",
            u8::from(c.is_leader())
        ));
        out.push_str(&format!(
            "spool_controller_leader_id {}\n",
            c.leader_node().unwrap_or(-1)
        ));
        out.push_str(&format!("spool_controller_raft_term {}\n", s.term));
        out.push_str(&format!(
            "spool_controller_commit_index {}\n",
            s.commit_index
        ));
        out.push_str(&format!(
            "spool_metadata_applied_offset {}\n",
            s.applied_index
        ));
        out.push_str(&format!("spool_controller_voters {}\n", s.voters.len()));
        out.push_str(&format!("spool_controller_learners {}\n", s.learners.len()));
        out.push_str(&format!(
            "spool_controller_is_learner {}\n",
            u8::from(s.learners.contains(&s.node_id))
        ));
        out.push_str(&format!(
            "spool_metadata_snapshots_installed_total {}\n",
            s.snapshots_installed
        ));
        out.push_str(&format!(
            "spool_controlled_shutdowns_total {}\n",
            c.shutdown_grants.total()
        ));
    }
    out
}
