//! The controller driver's side of the cluster (DESIGN §7): answering other brokers' calls on the
//! active controller (registration, heartbeats, forwarded metadata changes, partition leaders'
//! ISR changes), and forwarding this broker's own metadata changes and ISR changes to the active
//! controller when it is another node (Kafka's KIP-590 forwarding, so a client may send
//! CreateTopics to any broker).
//!
//! A call that reaches a node which is not the active controller is answered NOT_CONTROLLER, and
//! the caller finds the leader again: raft tells every voter who leads.

use std::rc::Rc;
use std::time::Duration;

use glommio::channels::local_channel;
use spool_core::isr_change::AlterPartitionAnswer;
use spool_protocol::internal::{
    ForwardAnswer, ForwardOp, ForwardTopic, ForwardTopicOutcome, Heartbeat, HeartbeatAnswer,
    InternalMessage, RegisterBroker, RegisterBrokerAnswer,
};
use spool_protocol::ErrorCode;
use spool_raft::alter_partition::leadership;
use spool_raft::controlled_shutdown::should_shut_down;
use spool_raft::image::BrokerListener;
use spool_raft::validate::{HeartbeatRequest, RegisterBrokerRequest};
use spool_raft::{AlterOutcome, AlterRefused, ControllerError, Polled, ProposalId, Uuid128};

use crate::alter_wire;
use crate::calls::Services;
use crate::controller::Controller;
use crate::requests::{AlterPartition, ControllerOp, NewTopic, ProducerIdRange, TopicOutcome};

/// How long a forwarded call waits for the active controller's answer.
pub const FORWARD_TIMEOUT_MS: u64 = 5_000;

/// How long the active controller waits for an ISR change to commit before answering `Lost`:
/// as long as a forwarder waits for it, so neither end holds a leader's in-flight slot longer.
pub const ALTER_PARTITION_COMMIT_TIMEOUT_MS: u64 = FORWARD_TIMEOUT_MS;

/// A refusal or a lost proposal, as (code, message).
type Failed = (ErrorCode, Option<String>);

impl Controller {
    /// Runs `op` here when this node is the active controller (or the only one), else forwards
    /// it to the active controller.
    pub async fn execute_or_forward<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        op: ControllerOp,
    ) -> Vec<TopicOutcome> {
        let Some(peers) = self.peers.clone().filter(|_| !self.is_leader()) else {
            return self.execute(services, op).await;
        };
        let names = op.outcome_names();
        let not_controller = |why: String| -> Vec<TopicOutcome> {
            names
                .iter()
                .map(|n| TopicOutcome {
                    name: n.clone(),
                    error: ErrorCode::NotController,
                    message: Some(why.clone()),
                })
                .collect()
        };
        let Some(leader) = self.leader_node() else {
            return not_controller("no active controller (an election is under way)".into());
        };
        let forward = match op {
            ControllerOp::CreateTopics {
                topics,
                validate_only,
            } => ForwardOp::CreateTopics {
                topics: topics
                    .into_iter()
                    .map(|t| ForwardTopic {
                        name: t.name,
                        partitions: t.partitions,
                        replication_factor: t.replication_factor,
                        configs: t.configs,
                    })
                    .collect(),
                validate_only,
            },
            ControllerOp::DeleteTopics { names } => ForwardOp::DeleteTopics { names },
            ControllerOp::CreatePartitions {
                topics,
                validate_only,
            } => ForwardOp::CreatePartitions {
                topics: topics
                    .into_iter()
                    .map(crate::topic_admin::new_partitions_to_wire)
                    .collect(),
                validate_only,
            },
            ControllerOp::AlterConfigs {
                topics,
                validate_only,
            } => ForwardOp::AlterConfigs {
                topics: topics
                    .into_iter()
                    .map(crate::topic_admin::alteration_to_wire)
                    .collect(),
                validate_only,
            },
            ControllerOp::ElectLeaders {
                unclean,
                partitions,
            } => ForwardOp::ElectLeaders {
                unclean,
                partitions: partitions
                    .into_iter()
                    .map(|tp| (tp.topic, tp.partition))
                    .collect(),
            },
        };
        match peers
            .call(
                leader,
                InternalMessage::Forward(forward),
                FORWARD_TIMEOUT_MS,
            )
            .await
        {
            Ok(InternalMessage::ForwardAnswer(ForwardAnswer::Topics(outcomes)))
                if outcomes.len() == names.len() =>
            {
                outcomes
                    .into_iter()
                    .map(|o| TopicOutcome {
                        name: o.name,
                        error: o.error,
                        message: o.message,
                    })
                    .collect()
            }
            Ok(other) => not_controller(format!("node {leader} answered {other:?}")),
            Err(e) => not_controller(format!("forwarding to the active controller: {e}")),
        }
    }

    /// A producer-id block for this broker, from the active controller wherever it runs.
    pub async fn allocate_or_forward<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
    ) -> ProducerIdRange {
        let broker_epoch = self.broker_epoch.get();
        let Some(peers) = self.peers.clone().filter(|_| !self.is_leader()) else {
            return self.allocate_producer_ids(services, self.node_id).await;
        };
        let leader = self.leader_node().ok_or(ErrorCode::NotController)?;
        let op = ForwardOp::AllocateProducerIds {
            broker_id: self.node_id,
            broker_epoch,
        };
        match peers
            .call(leader, InternalMessage::Forward(op), FORWARD_TIMEOUT_MS)
            .await
        {
            Ok(InternalMessage::ForwardAnswer(ForwardAnswer::ProducerIds(r))) => r,
            _ => Err(ErrorCode::NotController),
        }
    }

    /// A partition leader's ISR change, decided by the active controller wherever it runs: here
    /// when this node is the active controller (or the only one), else forwarded to it (within
    /// [`FORWARD_TIMEOUT_MS`]). `Lost` when no controller is known, none answers in time, or the
    /// proposal is lost with a leadership: the leader frees its slot and proposes afresh.
    pub async fn alter_partition_or_forward<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        request: AlterPartition,
    ) -> AlterPartitionAnswer {
        let Some(peers) = self.peers.clone().filter(|_| !self.is_leader()) else {
            return self.alter_partition_here(services, request).await;
        };
        let Some(leader) = self.leader_node() else {
            return AlterPartitionAnswer::Lost;
        };
        let op = ForwardOp::AlterPartition(alter_wire::to_op(&request));
        match peers
            .call(leader, InternalMessage::Forward(op), FORWARD_TIMEOUT_MS)
            .await
        {
            Ok(InternalMessage::ForwardAnswer(answer)) => alter_wire::answer_from_wire(answer),
            Ok(other) => {
                tracing::debug!(node = leader, "AlterPartition answered with {other:?}");
                AlterPartitionAnswer::Lost
            }
            Err(e) => {
                tracing::debug!(node = leader, "forwarding an AlterPartition: {e}");
                AlterPartitionAnswer::Lost
            }
        }
    }

    /// On the active controller: decides `call` ([`spool_raft::Controller::alter_partition`]),
    /// proposes its record and waits — at most [`ALTER_PARTITION_COMMIT_TIMEOUT_MS`] — for it to
    /// commit and reach every core, then answers with the partition's committed state (the
    /// requested one or a newer one); at once with the current state when the ISR already is
    /// the requested one, and with the refusal when the request does not fit the partition.
    async fn alter_partition_here<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        call: AlterPartition,
    ) -> AlterPartitionAnswer {
        let AlterPartition {
            topic_id,
            partition,
            request,
        } = call;
        let defaults = self.topic_defaults.clone();
        let decided = self
            .with_raft(move |raft| {
                let outcome = raft.alter_partition(topic_id, partition, &request, &defaults);
                let polled = matches!(outcome, Ok(AlterOutcome::Proposed(_))).then(|| raft.poll());
                let current = leadership(raft.image(), topic_id, partition);
                (outcome, polled, current)
            })
            .await;
        let Some((outcome, polled, current)) = decided else {
            return AlterPartitionAnswer::Lost;
        };
        let id = match outcome {
            Ok(AlterOutcome::Proposed(id)) => id,
            Ok(AlterOutcome::AlreadySo) => {
                return current.map_or(AlterPartitionAnswer::Lost, AlterPartitionAnswer::Committed)
            }
            Err(AlterRefused::Invalid(e)) => return AlterPartitionAnswer::Refused(e),
            Err(AlterRefused::Controller(r)) => {
                tracing::debug!(partition, "AlterPartition not proposed: {r}");
                return AlterPartitionAnswer::Lost;
            }
        };
        let commit = self.watch_commit(services, id, polled).await;
        let committed = futures_lite::future::or(async { Some(commit.await) }, async {
            glommio::timer::sleep(Duration::from_millis(ALTER_PARTITION_COMMIT_TIMEOUT_MS)).await;
            None
        })
        .await;
        match committed {
            Some(Ok(())) => self
                .with_raft(move |raft| leadership(raft.image(), topic_id, partition))
                .await
                .flatten()
                .map_or(AlterPartitionAnswer::Lost, AlterPartitionAnswer::Committed),
            Some(Err((code, message))) => {
                tracing::debug!(partition, ?code, ?message, "AlterPartition did not commit");
                AlterPartitionAnswer::Lost
            }
            None => AlterPartitionAnswer::Lost,
        }
    }

    /// Proposes what `f` builds, waits for its commit and its publication to every core.
    async fn propose_and_wait<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        f: impl FnOnce(&mut spool_raft::Controller) -> Result<Option<ProposalId>, spool_raft::Refusal>
            + Send
            + 'static,
    ) -> Result<(), Failed> {
        let proposed = self
            .with_raft(move |raft| {
                let id = f(raft);
                let polled = matches!(id, Ok(Some(_))).then(|| raft.poll());
                (id, polled)
            })
            .await
            .ok_or((
                ErrorCode::NotController,
                Some("the controller is closing".into()),
            ))?;
        let (id, polled) = proposed;
        let id = match id {
            Ok(Some(id)) => id,
            Ok(None) => return Ok(()),
            Err(r) => return Err((r.code, Some(r.message))),
        };
        self.watch_commit(services, id, polled).await.await
    }

    /// Watches proposal `id`, then hands on what the poll that followed the proposal produced
    /// (`polled`: `None` when there was none). The future returned ends when `id` has committed
    /// and reached every core, or was lost. Handing on runs to the end before it returns (it
    /// publishes other proposals' records too, so it must never be cut short); only the future
    /// returned may be dropped early — a dropped watch is skipped when `id` commits.
    async fn watch_commit<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        id: ProposalId,
        polled: Option<Result<Polled, ControllerError>>,
    ) -> impl std::future::Future<Output = Result<(), Failed>> {
        let (tx, rx) = local_channel::new_bounded(1);
        self.waiting.borrow_mut().insert(id, tx);
        match polled {
            Some(Ok(p)) => self.handle_polled(services, p).await,
            Some(Err(e)) => tracing::error!("controller poll: {e}"),
            None => {}
        }
        async move {
            match rx.recv().await {
                Some((Ok(()), _)) => Ok(()),
                Some((Err(code), _)) => Err((code, None)),
                None => Err((
                    ErrorCode::NotController,
                    Some("the controller lost the proposal".into()),
                )),
            }
        }
    }

    /// Registers a broker (this one or a peer); answers with its new broker epoch. On a node
    /// that is not the active controller, a broker's own registration (`sender` is the broker
    /// being registered) is passed on to the active controller once — so a broker that does not
    /// know who leads yet (a learner that just started) may ask any voter; a call passed on
    /// is never passed on again.
    pub async fn register<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        r: RegisterBroker,
        sender: i32,
    ) -> RegisterBrokerAnswer {
        let refused = |error: ErrorCode, message: String| RegisterBrokerAnswer {
            error,
            message: Some(message),
            broker_epoch: -1,
        };
        if !self.is_leader() {
            let (Some(leader), Some(peers)) = (self.leader_node(), self.peers.clone()) else {
                return refused(
                    ErrorCode::NotController,
                    "no active controller (an election is under way)".into(),
                );
            };
            if sender != r.broker_id || leader == self.node_id {
                return refused(
                    ErrorCode::NotController,
                    format!("node {} is not the active controller", self.node_id),
                );
            }
            return match peers
                .call(
                    leader,
                    InternalMessage::RegisterBroker(r),
                    FORWARD_TIMEOUT_MS,
                )
                .await
            {
                Ok(InternalMessage::RegisterBrokerAnswer(a)) => a,
                Ok(other) => refused(
                    ErrorCode::NotController,
                    format!("node {leader} answered {other:?}"),
                ),
                Err(e) => refused(ErrorCode::NotController, e.to_string()),
            };
        }
        let broker_id = r.broker_id;
        let cluster_id = match r.cluster_id.as_str() {
            "" => None,
            hex => match Uuid128::parse_hex(hex) {
                Some(id) => Some(id),
                None => {
                    return refused(
                        ErrorCode::InconsistentClusterId,
                        format!("{hex:?} is not a cluster id"),
                    )
                }
            },
        };
        let now_ms = crate::clock::monotonic_ms();
        let registered_session_live = self.sessions.borrow().as_ref().is_some_and(|s| {
            now_ms.saturating_sub(s.last_contact_ms(broker_id)) < self.session_timeout_ms
        });
        let request = RegisterBrokerRequest {
            broker_id,
            incarnation_id: Uuid128 {
                high: r.incarnation_high,
                low: r.incarnation_low,
            },
            listeners: r
                .listeners
                .into_iter()
                .map(|l| BrokerListener {
                    name: l.name,
                    host: l.host,
                    port: l.port,
                })
                .collect(),
            rack: r.rack,
            cluster_id,
            registered_session_live,
            previous_broker_epoch: r.previous_broker_epoch,
        };
        let done = self
            .propose_and_wait(services, move |raft| {
                raft.register_broker(&request).map(Some)
            })
            .await;
        match done {
            Ok(()) => {
                let now_ms = crate::clock::monotonic_ms();
                let epoch = self
                    .with_raft(move |raft| raft.image().broker(broker_id).map(|b| b.broker_epoch))
                    .await
                    .flatten();
                if let (Some(sessions), Some(e)) = (self.sessions.borrow_mut().as_mut(), epoch) {
                    sessions.on_register(broker_id, e, now_ms);
                }
                match epoch {
                    Some(broker_epoch) => RegisterBrokerAnswer {
                        error: ErrorCode::None,
                        message: None,
                        broker_epoch,
                    },
                    None => RegisterBrokerAnswer {
                        error: ErrorCode::NotController,
                        message: Some("the registration was not applied".into()),
                        broker_epoch: -1,
                    },
                }
            }
            Err((error, message)) => RegisterBrokerAnswer {
                error,
                message,
                broker_epoch: -1,
            },
        }
    }

    /// A broker's heartbeat; unfences it once it has caught up with the metadata log. One that
    /// wants to shut down is answered `should_shutdown` once the committed image shows its
    /// leaderships and ISR memberships moved away
    /// ([`spool_raft::controlled_shutdown::should_shut_down`]).
    pub async fn heartbeat<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        h: Heartbeat,
    ) -> HeartbeatAnswer {
        let broker_id = h.broker_id;
        let request = HeartbeatRequest {
            broker_id,
            broker_epoch: h.broker_epoch,
            current_metadata_offset: h.current_metadata_offset,
            want_fence: h.want_fence,
            want_shutdown: h.want_shutdown,
        };
        if let Some(sessions) = self.sessions.borrow_mut().as_mut() {
            sessions.on_heartbeat(broker_id, h.broker_epoch, crate::clock::monotonic_ms());
        }
        // A heartbeat that unfences its broker also gives it back the leaderless partitions it
        // may lead; the answer waits for the last of those records.
        let done = self
            .propose_and_wait(services, move |raft| {
                raft.heartbeat_and_elect(&request)
                    .map(|ids| ids.last().copied())
            })
            .await;
        if let Err((error, _)) = done {
            return HeartbeatAnswer {
                error,
                is_fenced: true,
                should_shutdown: false,
            };
        }
        // The committed image, not the latest: a move still in flight keeps the broker serving.
        let broker_epoch = h.broker_epoch;
        let state = self
            .with_raft(move |raft| {
                let image = raft.image();
                image.broker(broker_id).map(|b| {
                    let current = b.broker_epoch == broker_epoch;
                    (b.fenced, current && should_shut_down(image, broker_id))
                })
            })
            .await
            .flatten();
        let (fenced, should_shutdown) = state.unwrap_or((true, false));
        let should_shutdown = should_shutdown && h.want_shutdown;
        if should_shutdown && self.shutdown_grants.record(broker_id, h.broker_epoch) {
            tracing::info!(
                broker = broker_id,
                broker_epoch = h.broker_epoch,
                "controlled shutdown: the broker leads and follows nothing another in-sync replica could take over; it may stop"
            );
        }
        HeartbeatAnswer {
            error: ErrorCode::None,
            is_fenced: fenced,
            should_shutdown,
        }
    }

    /// A metadata change another broker forwarded here.
    pub async fn serve_forward<S: Services>(
        self: &Rc<Self>,
        services: &Rc<S>,
        op: ForwardOp,
    ) -> ForwardAnswer {
        if !self.is_leader() {
            return ForwardAnswer::NotController;
        }
        let op = match op {
            ForwardOp::AlterPartition(op) => {
                let answer = self
                    .alter_partition_here(services, alter_wire::from_op(op))
                    .await;
                return alter_wire::answer_to_wire(answer);
            }
            ForwardOp::AllocateProducerIds { broker_id, .. } => {
                return ForwardAnswer::ProducerIds(
                    self.allocate_producer_ids(services, broker_id).await,
                )
            }
            ForwardOp::CreateTopics {
                topics,
                validate_only,
            } => ControllerOp::CreateTopics {
                topics: topics
                    .into_iter()
                    .map(|t| NewTopic {
                        name: t.name,
                        partitions: t.partitions,
                        replication_factor: t.replication_factor,
                        configs: t.configs,
                    })
                    .collect(),
                validate_only,
            },
            ForwardOp::DeleteTopics { names } => ControllerOp::DeleteTopics { names },
            ForwardOp::CreatePartitions {
                topics,
                validate_only,
            } => ControllerOp::CreatePartitions {
                topics: topics
                    .into_iter()
                    .map(crate::topic_admin::new_partitions_from_wire)
                    .collect(),
                validate_only,
            },
            ForwardOp::AlterConfigs {
                topics,
                validate_only,
            } => ControllerOp::AlterConfigs {
                topics: topics
                    .into_iter()
                    .map(crate::topic_admin::alteration_from_wire)
                    .collect(),
                validate_only,
            },
            ForwardOp::ElectLeaders {
                unclean,
                partitions,
            } => ControllerOp::ElectLeaders {
                unclean,
                partitions: partitions
                    .into_iter()
                    .map(|(topic, p)| crate::requests::TopicPartition::new(topic, p))
                    .collect(),
            },
        };
        let outcomes = self.execute(services, op).await;
        ForwardAnswer::Topics(
            outcomes
                .into_iter()
                .map(|o| ForwardTopicOutcome {
                    name: o.name,
                    error: o.error,
                    message: o.message,
                })
                .collect(),
        )
    }
}
