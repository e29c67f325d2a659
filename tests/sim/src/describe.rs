//! One-line descriptions of metadata records for the trace.
//!
//! Owns: [`record`], the text a committed record shows as.
//! Promises: a pure function of the record (it is hashed into the trace), short enough to read.
//! Never does: decide anything.

use spool_protocol::metadata_records::{MetadataRecordBodyT, MetadataRecordT};

pub fn record(r: &MetadataRecordT) -> String {
    match &r.body {
        MetadataRecordBodyT::RegisterBroker(b) => {
            format!("RegisterBroker b{} epoch={} unclean={}", b.broker_id, b.broker_epoch, b.unclean_shutdown)
        }
        MetadataRecordBodyT::BrokerHeartbeat(b) => format!(
            "BrokerHeartbeat b{} epoch={} fence={} shutdown={}",
            b.broker_id, b.broker_epoch, b.want_fence, b.want_shutdown
        ),
        MetadataRecordBodyT::FenceBroker(b) => {
            format!("FenceBroker b{} epoch={}", b.broker_id, b.broker_epoch)
        }
        MetadataRecordBodyT::UnfenceBroker(b) => {
            format!("UnfenceBroker b{} epoch={}", b.broker_id, b.broker_epoch)
        }
        MetadataRecordBodyT::CreateTopic(t) => format!(
            "CreateTopic {} id={:x} partitions={}",
            t.name,
            t.topic_id.low,
            t.partitions.as_ref().map_or(0, Vec::len)
        ),
        MetadataRecordBodyT::DeleteTopic(t) => {
            format!("DeleteTopic {} id={:x}", t.name, t.topic_id.low)
        }
        MetadataRecordBodyT::PartitionChange(p) => format!(
            "PartitionChange {:x}/{} leader={} isr={:?} elr={:?} leader_epoch={} partition_epoch={}",
            p.topic_id.low,
            p.partition_index,
            p.leader,
            p.isr,
            p.eligible_leaders,
            p.leader_epoch,
            p.partition_epoch
        ),
        MetadataRecordBodyT::ProducerIdBlock(b) => format!(
            "ProducerIdBlock b{} first={} size={}",
            b.assigned_broker_id, b.first_producer_id, b.block_size
        ),
        other => format!("{other:?}"),
    }
}
