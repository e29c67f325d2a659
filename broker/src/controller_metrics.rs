//! The controller's and the metadata image's gauges for `/metrics` (DESIGN §10), from core 0: is
//! this node the active controller, its raft term and commit index, the metadata offset applied
//! here, registered and fenced brokers, and a digest of the image — equal on every broker once
//! they have applied the same log, which is how a test (or an operator) sees that they agree.

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
pub fn render(image: &MetadataImage, controller: Option<&Controller>) -> String {
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
    }
    out
}
