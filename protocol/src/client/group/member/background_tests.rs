//! The member's background duty (`background.rs`) driven with a hand-moved clock: what it sends
//! while the application processes records between two polls.

use super::tests::{error_body, one, reply, stable_leader, tps, T0};
use super::*;
use crate::client::net::ClientCore;
use crate::client::test_util::{requests, respond};
use crate::codec::Request;
use crate::wire::*;
use crate::ErrorCode;

fn kinds(sent: &[(String, Request)]) -> Vec<&'static str> {
    sent.iter()
        .map(|(_, r)| match &r.header.body {
            RequestBodyT::HeartbeatRequest(_) => "heartbeat",
            RequestBodyT::LeaveGroupRequest(_) => "leave",
            RequestBodyT::OffsetCommitRequest(_) => "commit",
            RequestBodyT::JoinGroupRequest(_) => "join",
            RequestBodyT::FindCoordinatorRequest(_) => "find",
            _ => "other",
        })
        .collect()
}

fn ok_heartbeat() -> ResponseBodyT {
    ResponseBodyT::HeartbeatResponse(Box::default())
}

/// Runs the background duty alone from `from_ms` to `until_ms`, waking when it asks to and
/// answering each heartbeat with `answer`; returns every request it sent.
fn run_background(
    core: &mut GroupCore,
    from_ms: u64,
    until_ms: u64,
    answer: impl Fn(&Request) -> Option<ResponseBodyT>,
) -> Vec<(String, Request)> {
    let mut sent = Vec::new();
    let mut now = from_ms;
    // Bounded: every wake-up moves the clock forward.
    while now <= until_ms {
        let reqs = requests(&core.background_actions(now));
        for (addr, req) in &reqs {
            if let Some(body) = answer(req) {
                core.on_response(addr, respond(req, body, bytes::Bytes::new()), now);
            }
        }
        sent.extend(reqs);
        match core.background_wakeup_ms(now) {
            Some(t) => {
                assert!(t > now, "a wake-up in the past would spin");
                now = t;
            }
            None => break,
        }
    }
    sent
}

#[test]
fn heartbeats_keep_a_busy_member_past_its_session_timeout() {
    let mut core = stable_leader(Assignor::Range, None);
    core.processed(&tps(&[1])[0], 7);
    let session_ms = core.config.session_timeout_ms;
    let interval_ms = core.config.heartbeat_interval_ms;
    // The application processes for three session timeouts (well within max_poll_interval_ms).
    let until = T0 + 3 * session_ms;
    assert!(until - T0 < core.config.max_poll_interval_ms);
    let sent = run_background(&mut core, T0 + 1, until, |r| {
        matches!(r.header.body, RequestBodyT::HeartbeatRequest(_)).then(ok_heartbeat)
    });
    let kinds = kinds(&sent);
    assert!(kinds.iter().all(|k| *k == "heartbeat"), "sent {kinds:?}");
    assert!(
        kinds.len() as u64 >= 3 * session_ms / interval_ms - 1,
        "a heartbeat every heartbeat_interval_ms: {} in {} ms",
        kinds.len(),
        until - T0
    );
    // Nothing the application must see first: no auto-commit of records it may still be
    // processing, no event.
    assert!(core.take_events().is_empty());
    assert!(core.is_stable());
    assert_eq!(core.generation(), 1);
    assert_eq!(core.assignment(), tps(&[0, 1, 2, 3]));
}

#[test]
fn past_max_poll_interval_it_leaves_and_the_next_poll_rejoins() {
    let mut core = stable_leader(Assignor::Range, None);
    let max_poll_ms = core.config.max_poll_interval_ms;
    let sent = run_background(&mut core, T0 + 1, T0 + max_poll_ms + 1, |r| {
        matches!(r.header.body, RequestBodyT::HeartbeatRequest(_)).then(ok_heartbeat)
    });
    let kinds = kinds(&sent);
    assert_eq!(kinds.last(), Some(&"leave"), "sent {kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "leave").count(), 1);
    assert_eq!(
        core.take_events(),
        vec![GroupEvent::Revoked {
            generation: 1,
            partitions: tps(&[0, 1, 2, 3]),
            lost: true
        }]
    );
    // No heartbeat and no join while the application is still away.
    let later = T0 + max_poll_ms + 10_000;
    assert!(requests(&core.background_actions(later)).is_empty());
    core.polled(later);
    let join = one(&mut core, later);
    assert!(matches!(
        join.1.header.body,
        RequestBodyT::JoinGroupRequest(_)
    ));
}

#[test]
fn a_rebalance_waits_for_the_next_poll() {
    let mut core = stable_leader(Assignor::Range, None);
    core.processed(&tps(&[1])[0], 7);
    let at = core.background_wakeup_ms(T0).expect("a heartbeat is due");
    let hb = requests(&core.background_actions(at));
    assert_eq!(kinds(&hb), ["heartbeat"]);
    reply(
        &mut core,
        &hb[0],
        error_body(&hb[0].1, ErrorCode::RebalanceInProgress),
        at,
    );
    // Neither the revocation's commit nor the join goes out from the background, and it stops
    // heartbeating: the coordinator waits max_poll_interval_ms for the rejoin.
    let sent = run_background(&mut core, at + 1, at + 60_000, |_| None);
    assert!(
        kinds(&sent)
            .iter()
            .all(|k| *k != "heartbeat" && *k != "join" && *k != "commit"),
        "sent {:?}",
        kinds(&sent)
    );
    assert!(core.take_events().is_empty());
    // The next poll commits, revokes (through the events), then joins.
    core.polled(at + 60_000);
    let sent = requests(&core.poll_actions(at + 60_000));
    let kinds = kinds(&sent);
    assert!(
        kinds.contains(&"commit") && !kinds.contains(&"join"),
        "the revocation's commit comes first: {kinds:?}"
    );
}
