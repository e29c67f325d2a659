//! AlterPartition between brokers: the broker's call ([`AlterPartition`], spool-core's
//! [`AlterPartitionAnswer`]) to and from the internal protocol's forwarded form
//! ([`AlterPartitionOp`], [`ForwardAnswer::AlterPartition`]), for a leader whose core 0 is not the
//! active controller.
//!
//! Owns: the field-by-field mapping both ways, and the one lossy step — an answer that is not a
//! committed state or a refusal the leader knows (NOT_CONTROLLER, an error number this build does
//! not map) reads as [`AlterPartitionAnswer::Lost`], so the leader frees its slot and proposes
//! afresh instead of waiting on an answer it cannot use.
//! Promises: pure; `from_op(to_op(x)) == x` and every [`AlterPartitionAnswer`] but `Lost`
//! survives `answer_from_wire(answer_to_wire(x))`.
//! Never does: send anything (`controller_calls` does) or decide anything.

use spool_core::isr_change::{
    AlterPartitionAnswer, AlterPartitionError, AlterPartitionRequest, IsrMember,
};
use spool_core::replica::Leadership;
use spool_protocol::internal::{
    AlterPartitionOp, AlterPartitionRefusal, ForwardAnswer, PartitionLeadership,
};
use spool_protocol::ErrorCode;
use spool_raft::Uuid128;

use crate::requests::AlterPartition;

/// The call as it is forwarded.
pub fn to_op(call: &AlterPartition) -> AlterPartitionOp {
    let r = &call.request;
    AlterPartitionOp {
        topic_id: call.topic_id.to_bytes(),
        partition: call.partition,
        broker_id: r.broker_id,
        broker_epoch: r.broker_epoch,
        leader_epoch: r.leader_epoch,
        partition_epoch: r.partition_epoch,
        new_isr: r
            .new_isr
            .iter()
            .map(|m| (m.broker_id, m.broker_epoch))
            .collect(),
    }
}

/// A forwarded call, back as the broker's own.
pub fn from_op(op: AlterPartitionOp) -> AlterPartition {
    AlterPartition {
        topic_id: Uuid128::from_bytes(op.topic_id),
        partition: op.partition,
        request: AlterPartitionRequest {
            broker_id: op.broker_id,
            broker_epoch: op.broker_epoch,
            leader_epoch: op.leader_epoch,
            partition_epoch: op.partition_epoch,
            new_isr: op
                .new_isr
                .into_iter()
                .map(|(broker_id, broker_epoch)| IsrMember {
                    broker_id,
                    broker_epoch,
                })
                .collect(),
        },
    }
}

/// The active controller's answer, as it travels back. `Lost` (the proposal was lost with a
/// leadership, or did not commit in time) goes as NOT_CONTROLLER: the sender finds the
/// controller again.
pub fn answer_to_wire(answer: AlterPartitionAnswer) -> ForwardAnswer {
    match answer {
        AlterPartitionAnswer::Committed(l) => {
            ForwardAnswer::AlterPartition(Ok(PartitionLeadership {
                leader_id: l.leader_id,
                leader_epoch: l.leader_epoch,
                partition_epoch: l.partition_epoch,
                replicas: l.replicas,
                isr: l.isr,
            }))
        }
        AlterPartitionAnswer::Refused(e) => {
            ForwardAnswer::AlterPartition(Err(AlterPartitionRefusal {
                error: e.error_code(),
                ineligible_broker_id: match e {
                    AlterPartitionError::IneligibleReplica { broker_id } => Some(broker_id),
                    _ => None,
                },
            }))
        }
        AlterPartitionAnswer::Lost => ForwardAnswer::NotController,
    }
}

/// A forwarded answer, back as the leader takes it.
pub fn answer_from_wire(answer: ForwardAnswer) -> AlterPartitionAnswer {
    match answer {
        ForwardAnswer::AlterPartition(Ok(l)) => AlterPartitionAnswer::Committed(Leadership {
            leader_id: l.leader_id,
            leader_epoch: l.leader_epoch,
            partition_epoch: l.partition_epoch,
            replicas: l.replicas,
            isr: l.isr,
        }),
        ForwardAnswer::AlterPartition(Err(refusal)) => refusal_from_wire(refusal)
            .map_or(AlterPartitionAnswer::Lost, AlterPartitionAnswer::Refused),
        _ => AlterPartitionAnswer::Lost,
    }
}

/// The refusal a code stands for; `None` for a code no AlterPartition refusal has, and for an
/// INELIGIBLE_REPLICA that does not name its member (no well-formed peer sends one).
fn refusal_from_wire(refusal: AlterPartitionRefusal) -> Option<AlterPartitionError> {
    Some(match refusal.error {
        ErrorCode::StaleBrokerEpoch => AlterPartitionError::StaleBrokerEpoch,
        ErrorCode::FencedLeaderEpoch => AlterPartitionError::FencedLeaderEpoch,
        ErrorCode::InvalidRequest => AlterPartitionError::InvalidRequest,
        ErrorCode::InvalidUpdateVersion => AlterPartitionError::InvalidUpdateVersion,
        ErrorCode::IneligibleReplica => AlterPartitionError::IneligibleReplica {
            broker_id: refusal.ineligible_broker_id?,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> AlterPartition {
        AlterPartition {
            topic_id: Uuid128 {
                high: 0x0102_0304_0506_0708,
                low: 0x1112_1314_1516_1718,
            },
            partition: 4,
            request: AlterPartitionRequest {
                broker_id: 1,
                broker_epoch: 10,
                leader_epoch: 3,
                partition_epoch: 7,
                new_isr: vec![
                    IsrMember {
                        broker_id: 1,
                        broker_epoch: 10,
                    },
                    IsrMember {
                        broker_id: 2,
                        broker_epoch: -1,
                    },
                ],
            },
        }
    }

    #[test]
    fn a_call_survives_the_wire() {
        let op = to_op(&call());
        assert_eq!(op.topic_id[0], 0x01);
        assert_eq!(op.new_isr, vec![(1, 10), (2, -1)]);
        let back = from_op(op);
        assert_eq!(
            (back.topic_id, back.partition, back.request),
            (call().topic_id, 4, call().request)
        );
    }

    #[test]
    fn answers_survive_the_wire_and_lost_is_not_controller() {
        let committed = AlterPartitionAnswer::Committed(Leadership {
            leader_id: 1,
            leader_epoch: 3,
            partition_epoch: 8,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
        });
        let refusals = [
            AlterPartitionError::StaleBrokerEpoch,
            AlterPartitionError::FencedLeaderEpoch,
            AlterPartitionError::InvalidRequest,
            AlterPartitionError::InvalidUpdateVersion,
            AlterPartitionError::IneligibleReplica { broker_id: 3 },
        ];
        let answers = std::iter::once(committed)
            .chain(refusals.into_iter().map(AlterPartitionAnswer::Refused));
        for answer in answers {
            assert_eq!(answer_from_wire(answer_to_wire(answer.clone())), answer);
        }
        assert_eq!(
            answer_to_wire(AlterPartitionAnswer::Lost),
            ForwardAnswer::NotController
        );
        assert_eq!(
            answer_from_wire(ForwardAnswer::NotController),
            AlterPartitionAnswer::Lost
        );
    }

    #[test]
    fn refusals_it_cannot_use_are_lost() {
        for (error, ineligible_broker_id) in [
            (ErrorCode::NotController, None),
            (ErrorCode::UnknownServerError, None),
            (ErrorCode::IneligibleReplica, None),
        ] {
            let wire = ForwardAnswer::AlterPartition(Err(AlterPartitionRefusal {
                error,
                ineligible_broker_id,
            }));
            assert_eq!(
                answer_from_wire(wire),
                AlterPartitionAnswer::Lost,
                "{error:?}"
            );
        }
        assert_eq!(
            answer_from_wire(ForwardAnswer::ProducerIds(Ok((0, 1)))),
            AlterPartitionAnswer::Lost
        );
    }
}
