//! This broker's session with the active controller (DESIGN §7), on core 0 of a clustered
//! broker: register (broker id, incarnation id, listeners, rack), then heartbeat every
//! `--broker-heartbeat-interval-ms` with the metadata offset this broker has applied, so the
//! controller unfences it once it has caught up and fences it when the heartbeats stop.
//!
//! The active controller may be this node or another: the call goes through the controller
//! driver either way ([`Controller::register`] here, or the internal port there). A refusal that
//! means "register again" (an unknown broker, a stale epoch) starts over; "not the controller" or
//! no answer waits a moment and asks whoever leads now. A single-node broker has no session: it
//! registers itself when its controller opens.
//!
//! Once the stop sequence asks for a controlled shutdown ([`crate::handoff::Handoff::want`]),
//! every heartbeat carries `want_shutdown` — the first one at once, not an interval later — and
//! an answer with `should_shutdown` is recorded ([`crate::handoff::Handoff::grant`]); the
//! heartbeats go on until the core stops, so the broker is not fenced while it drains. A broker
//! that is stopping never registers again: with no registration it has nothing to hand away.

use std::rc::Rc;
use std::time::Duration;

use spool_protocol::internal::{Heartbeat, InternalMessage, Listener, RegisterBroker};
use spool_protocol::ErrorCode;

use crate::calls::Services;
use crate::controller::Controller;
use crate::local::Local;

/// How long one registration or heartbeat waits for its answer, in heartbeat intervals: short,
/// so that a broker whose controller vanished asks the new one before its grace runs out.
const CALL_TIMEOUT_HEARTBEATS: u64 = 2;
/// How long a registration waits (it waits for a commit; rare, so generous).
const REGISTER_TIMEOUT_MS: u64 = 1_000;
/// Wait before asking again when no controller answered.
const RETRY_MS: u64 = 100;
/// How long a registration refused as a duplicate keeps trying, in session timeouts: a broker
/// restarted right after `kill -9` is refused until its previous incarnation's session runs
/// out (one session timeout, plus the new controller's grace after a failover); a second
/// process with a live broker's id is refused for good, and stops with the reason.
const DUPLICATE_PATIENCE_SESSIONS: u64 = 3;

/// This broker's registration, as the active controller will see it.
fn registration(
    local: &Local,
    incarnation: (u64, u64),
    previous_broker_epoch: i64,
) -> RegisterBroker {
    let cfg = &local.config;
    let listener = |name: &str, port: u16| Listener {
        name: name.into(),
        host: cfg.host.clone(),
        port,
    };
    RegisterBroker {
        broker_id: cfg.node_id,
        incarnation_high: incarnation.0,
        incarnation_low: incarnation.1,
        listeners: vec![
            listener("native", cfg.native_port),
            Listener {
                name: "kafka".into(),
                host: cfg.advertised_host.clone(),
                port: cfg.advertised_kafka_port,
            },
            listener("internal", cfg.internal_port),
        ],
        rack: cfg.rack.clone(),
        previous_broker_epoch,
        cluster_id: local.cluster_id().unwrap_or_default(),
    }
}

/// Registers and heartbeats until the core stops.
pub fn spawn<S: Services>(
    controller: Rc<Controller>,
    local: Rc<Local>,
    services: Rc<S>,
    incarnation: (u64, u64),
) {
    glommio::spawn_local(async move {
        let interval = Duration::from_millis(local.config.broker_heartbeat_interval_ms);
        // When the id was first refused as taken, and by which active controller.
        let mut duplicate_since_ms: Option<(u64, Option<i32>)> = None;
        let mut attempt: usize = 0;
        while !local.stopping.get() {
            let handing_off = controller.handoff.wanted();
            if controller.broker_epoch.get() < 0 && handing_off {
                // The stop sequence sees the missing registration and goes on; wait for it.
                let _: Option<()> = local.stopped_signal().await;
                continue;
            }
            if controller.broker_epoch.get() < 0 {
                let r = registration(&local, incarnation, controller.previous_broker_epoch.get());
                attempt = attempt.wrapping_add(1);
                match register(&controller, &services, r, attempt).await {
                    Ok(epoch) => {
                        tracing::info!(broker_epoch = epoch, "registered with the controller");
                        controller.broker_epoch.set(epoch);
                        controller.previous_broker_epoch.set(epoch);
                        duplicate_since_ms = None;
                        record_registration(&local, epoch).await;
                    }
                    Err((ErrorCode::InconsistentClusterId, why)) => {
                        crate::stop_signal::fail(format!(
                            "the controller quorum refused this broker: {why}"
                        ));
                        return;
                    }
                    Err((ErrorCode::DuplicateBrokerRegistration, why)) => {
                        let now_ms = crate::clock::monotonic_ms();
                        // Patience counts refusals from one active controller: a new one
                        // starts every broker's session afresh, so its clock restarts too.
                        let leader = controller.leader_node();
                        if duplicate_since_ms.is_some_and(|(_, l)| l != leader) {
                            duplicate_since_ms = None;
                        }
                        let (since_ms, _) = *duplicate_since_ms.get_or_insert((now_ms, leader));
                        let patience_ms =
                            local.config.broker_session_timeout_ms * DUPLICATE_PATIENCE_SESSIONS;
                        if now_ms.saturating_sub(since_ms) > patience_ms {
                            crate::stop_signal::fail(format!(
                                "the controller quorum refused this broker for {patience_ms} ms: {why}"
                            ));
                            return;
                        }
                        tracing::info!("registration refused, retrying: {why}");
                        glommio::timer::sleep(Duration::from_millis(RETRY_MS)).await;
                        continue;
                    }
                    Err((_, why)) => {
                        // Not a refusal of the id (no controller, an election): the patience
                        // clock counts only uninterrupted refusals.
                        duplicate_since_ms = None;
                        tracing::debug!("registration: {why}");
                        glommio::timer::sleep(Duration::from_millis(RETRY_MS)).await;
                        continue;
                    }
                }
            }
            let applied = controller
                .status
                .borrow()
                .as_ref()
                .map_or(0, |s| s.applied_index);
            let call_timeout_ms =
                local.config.broker_heartbeat_interval_ms * CALL_TIMEOUT_HEARTBEATS;
            let h = Heartbeat {
                broker_id: local.config.node_id,
                broker_epoch: controller.broker_epoch.get(),
                current_metadata_offset: i64::try_from(applied).unwrap_or(i64::MAX),
                want_fence: false,
                want_shutdown: handing_off,
            };
            match heartbeat(&controller, &services, h, call_timeout_ms).await {
                Ok(should_shutdown) => {
                    if handing_off && should_shutdown {
                        controller.handoff.grant();
                    }
                }
                Err(ErrorCode::StaleBrokerEpoch) | Err(ErrorCode::BrokerNotAvailable) => {
                    controller.broker_epoch.set(-1);
                    continue;
                }
                Err(_) => {}
            }
            let seen = controller.handoff.state();
            let stopped = async {
                let _: Option<()> = local.stopped_signal().await;
            };
            // A controlled shutdown asked for meanwhile heartbeats at once.
            let asked = async {
                if !handing_off {
                    controller.handoff.changed(seen).await;
                } else {
                    futures_lite::future::pending::<()>().await;
                }
            };
            futures_lite::future::or(
                glommio::timer::sleep(interval),
                futures_lite::future::or(stopped, asked),
            )
            .await;
        }
    })
    .detach();
}

/// Under `durability = fsync` the data directory records each registration's epoch
/// (`crate::clean_shutdown`): whatever this broker reported is on its disk, so a crash loses
/// nothing it counted for, and the next start registers as clean; only a lost or replaced data
/// directory (no mark) registers as an unclean shutdown (KIP-966, KIP-903). Under `replicated`
/// durability a crash may lose what it reported, so only a clean shutdown writes the mark
/// (Kafka's rule).
async fn record_registration(local: &Rc<Local>, broker_epoch: i64) {
    if local.config.durability != spool_storage::Durability::Fsync {
        return;
    }
    let data_dir = local.config.data_dir.clone();
    let written = glommio::executor()
        .spawn_blocking(move || crate::clean_shutdown::record(&data_dir, broker_epoch))
        .await;
    if let Err(e) = written {
        tracing::warn!("recording the registration's broker epoch: {e}");
    }
}

/// Registers with the active controller — here, or wherever raft says it is; while nobody
/// knows (this broker is a learner that has not been added yet, or an election runs), with the
/// voters in turn (`attempt` picks one), which pass it on to the active controller.
async fn register<S: Services>(
    controller: &Rc<Controller>,
    services: &Rc<S>,
    r: RegisterBroker,
    attempt: usize,
) -> Result<i64, (ErrorCode, String)> {
    let me = r.broker_id;
    let answer = if controller.is_leader() {
        controller.register(services, r, me).await
    } else {
        let Some(peers) = controller.peers.clone() else {
            return Err((ErrorCode::NotController, "no peers".into()));
        };
        let others: Vec<i32> = peers
            .voter_ids()
            .iter()
            .copied()
            .filter(|v| *v != me)
            .collect();
        let target = match controller.leader_node() {
            Some(leader) => leader,
            None if others.is_empty() => {
                return Err((ErrorCode::NotController, "no active controller yet".into()))
            }
            None => others[attempt % others.len()],
        };
        match peers
            .call(
                target,
                InternalMessage::RegisterBroker(r),
                REGISTER_TIMEOUT_MS,
            )
            .await
        {
            Ok(InternalMessage::RegisterBrokerAnswer(a)) => a,
            Ok(other) => {
                return Err((
                    ErrorCode::NotController,
                    format!("node {target} answered {other:?}"),
                ))
            }
            Err(e) => return Err((ErrorCode::NotController, e.to_string())),
        }
    };
    match answer.error {
        ErrorCode::None => Ok(answer.broker_epoch),
        code => Err((
            code,
            format!("{code}: {}", answer.message.unwrap_or_default()),
        )),
    }
}

/// One heartbeat to the active controller; its answer's `should_shutdown`.
async fn heartbeat<S: Services>(
    controller: &Rc<Controller>,
    services: &Rc<S>,
    h: Heartbeat,
    call_timeout_ms: u64,
) -> Result<bool, ErrorCode> {
    let answer = if controller.is_leader() {
        controller.heartbeat(services, h).await
    } else {
        let (Some(leader), Some(peers)) = (controller.leader_node(), controller.peers.clone())
        else {
            return Err(ErrorCode::NotController);
        };
        match peers
            .call(leader, InternalMessage::Heartbeat(h), call_timeout_ms)
            .await
        {
            Ok(InternalMessage::HeartbeatAnswer(a)) => a,
            _ => return Err(ErrorCode::NotController),
        }
    };
    match answer.error {
        ErrorCode::None => Ok(answer.should_shutdown),
        code => Err(code),
    }
}
