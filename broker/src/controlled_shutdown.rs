//! Controlled shutdown on the broker (DESIGN §7; Kafka's `BrokerLifecycleManager` and the wait
//! in its broker's shutdown): on SIGTERM a clustered broker first asks the active controller to
//! move its leaderships to other in-sync replicas, keeps serving while it waits, and only then
//! lets its cores drain, close their partitions and write the clean-shutdown mark — so a rolling
//! restart shows clients a leader change (NOT_LEADER_OR_FOLLOWER, then the new leader), not
//! requests timing out on a partition whose leader is gone until the controller fences it.
//!
//! Owns: the first step of the stop sequence. Core 0 asks ([`crate::handoff::Handoff::want`]:
//! the heartbeat loop in [`crate::broker_session`] then sends `want_shutdown`) and waits — at
//! most `--controlled-shutdown-timeout-ms` — for the controller's `should_shutdown`, then
//! releases every core ([`crate::stop_signal::release`]); the other cores wait for that, bounded
//! too. At the very end, core 0 logs what its last image says this broker still leads.
//! Promises: every wait is bounded: with no controller answering, the broker stops after the
//! bound with a warning. Single-node brokers, a zero bound and stops the process asks for itself
//! ([`crate::stop_signal::request`]) skip the hand-off and stop as before.
//! Never does: decide what moves or when the broker may stop (the controller does, in
//! `spool_raft::controlled_shutdown`), or stop anything itself (the runtime does, once released).

use std::rc::Rc;
use std::time::Duration;

use crate::config::BrokerConfig;
use crate::controller::Controller;
use crate::local::Local;

/// How long the other cores wait for core 0 past the bound before stopping on their own: the
/// heartbeat in flight at the bound ends within its own timeout (two heartbeat intervals), and
/// a core 0 that never got as far as its hand-off (it failed to start) must not keep the
/// others running for ever.
const RELEASE_MARGIN_MS: u64 = 5_000;
/// How often the other cores look whether core 0 has released them.
const RELEASE_POLL_MS: u64 = 20;

/// How core 0's hand-off ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffOutcome {
    /// The controller answered `should_shutdown`: nothing this broker leads could move further.
    Granted { waited_ms: u64 },
    /// No `should_shutdown` within the bound.
    TimedOut { waited_ms: u64 },
    /// This broker has no registration the controller knows (it never registered, or its epoch
    /// went stale): it leads nothing in any image that matters.
    NotRegistered,
    /// No hand-off: a single node, `--controlled-shutdown-timeout-ms 0`, a stop the process
    /// asked for itself, or a controller that never opened.
    Skipped,
}

/// Core 0, once a stop was requested: the hand-off, its outcome logged, then every core released.
pub async fn hand_off_then_release(controller: Option<Rc<Controller>>, config: &BrokerConfig) {
    match hand_off(controller, config).await {
        HandoffOutcome::Granted { waited_ms } => tracing::info!(
            waited_ms,
            "controlled shutdown: the controller moved this broker's leaderships to other in-sync replicas; stopping"
        ),
        HandoffOutcome::TimedOut { waited_ms } => tracing::warn!(
            waited_ms,
            "controlled shutdown: the controller did not let this broker stop within --controlled-shutdown-timeout-ms ({} ms): no controller answered, or its leaderships could not move; stopping anyway, and its partitions wait for the controller to fence it",
            config.controlled_shutdown_timeout_ms
        ),
        HandoffOutcome::NotRegistered => tracing::info!(
            "controlled shutdown: not registered with the controller, nothing to hand off; stopping"
        ),
        HandoffOutcome::Skipped => {}
    }
    crate::stop_signal::release();
}

/// Asks for the controlled shutdown and waits for the controller's answer (see the module docs).
pub async fn hand_off(controller: Option<Rc<Controller>>, config: &BrokerConfig) -> HandoffOutcome {
    let bound_ms = config.controlled_shutdown_timeout_ms;
    if !config.clustered() || bound_ms == 0 || crate::stop_signal::released() {
        return HandoffOutcome::Skipped;
    }
    let Some(c) = controller else {
        return HandoffOutcome::Skipped;
    };
    if c.broker_epoch.get() < 0 {
        return HandoffOutcome::NotRegistered;
    }
    tracing::info!(
        bound_ms,
        "controlled shutdown: asking the controller to move this broker's leaderships away"
    );
    c.handoff.want();
    let start_ms = crate::clock::monotonic_ms();
    let deadline_ms = start_ms.saturating_add(bound_ms);
    // Look again at least every heartbeat: the registration may go stale between changes.
    let recheck_ms = config.broker_heartbeat_interval_ms.max(1);
    loop {
        let now_ms = crate::clock::monotonic_ms();
        let waited_ms = now_ms.saturating_sub(start_ms);
        if c.handoff.granted() {
            return HandoffOutcome::Granted { waited_ms };
        }
        if c.broker_epoch.get() < 0 {
            return HandoffOutcome::NotRegistered;
        }
        if now_ms >= deadline_ms {
            return HandoffOutcome::TimedOut { waited_ms };
        }
        let nap = Duration::from_millis((deadline_ms - now_ms).min(recheck_ms));
        futures_lite::future::or(c.handoff.changed(c.handoff.state()), async {
            glommio::timer::sleep(nap).await;
        })
        .await;
    }
}

/// Any core but 0, once a stop was requested: waits until core 0 releases the cores (at once on
/// a single node, which has no hand-off), at most the hand-off's bound plus a margin.
pub async fn wait_for_release(config: &BrokerConfig) {
    if !config.clustered() {
        return;
    }
    let start_ms = crate::clock::monotonic_ms();
    let bound_ms = config
        .controlled_shutdown_timeout_ms
        .saturating_add(RELEASE_MARGIN_MS);
    while !crate::stop_signal::released()
        && crate::clock::monotonic_ms().saturating_sub(start_ms) < bound_ms
    {
        glommio::timer::sleep(Duration::from_millis(RELEASE_POLL_MS)).await;
    }
}

/// Core 0 of a clustered broker, after its partitions closed: what its last committed image says
/// it still leads, as `leading at exit: [topic-partition, …]` — empty after a controlled
/// shutdown, unless a partition had no other in-sync replica to move to. Operators (and the
/// rolling-restart test) read it to see that the broker left nothing behind.
pub fn log_leaderships_at_exit(local: &Local) {
    if !local.config.clustered() {
        return;
    }
    let led = led_by(&local.image.borrow(), local.config.node_id);
    tracing::info!(
        partitions = led.len(),
        "leading at exit: [{}]",
        led.join(", ")
    );
}

/// `topic-partition` for every partition `broker_id` leads in `image`, in topic order.
fn led_by(image: &spool_raft::MetadataImage, broker_id: i32) -> Vec<String> {
    image
        .topics()
        .flat_map(|t| {
            (0..)
                .zip(&t.partitions)
                .filter(|(_, p)| p.leader == broker_id)
                .map(|(i, _): (i32, _)| format!("{}-{i}", t.name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_raft::records;

    #[test]
    fn led_by_names_each_partition_the_broker_leads() {
        let mut image = spool_raft::MetadataImage::new();
        let create = records::create_topic(
            "t",
            spool_raft::Uuid128 { high: 1, low: 1 },
            vec![],
            vec![
                records::partition_assignment(0, vec![1, 2], vec![1, 2], 1, 0, 0),
                records::partition_assignment(1, vec![2, 1], vec![2, 1], 2, 0, 0),
                records::partition_assignment(2, vec![1], vec![1], 1, 0, 0),
            ],
        );
        assert_eq!(image.apply(&create), Ok(()));
        assert_eq!(led_by(&image, 1), ["t-0", "t-2"]);
        assert_eq!(led_by(&image, 3), Vec::<String>::new());
    }
}
