//! Consumer groups through real processes (issue #6 item 6): `spool consume --group` members
//! started, killed (`kill -9`), paused and restarted around one `spool serve`, and the group
//! protocol spoken by hand where a test must forge a generation or a member id.
//!
//! - [`membership`]: who consumes what — sharing, `kill -9`, static restarts, cooperative
//!   rebalancing;
//! - [`offsets`]: where members start — committed offsets across broker restarts, commits from
//!   an old generation or an unknown member refused, `--reset earliest|latest`, a deleted
//!   topic's offsets gone (and staying gone across a crash);
//! - [`fencing`]: a member paused past its session is fenced, gives up its partitions and
//!   rejoins, and its zombie commits move nothing backwards;
//! - [`admin`]: `spool group describe` lag, `group list`, `reset-offsets`;
//! - [`deletes`]: `group delete` and `group delete-offsets`, refused while members are in;
//! - [`slow_handler`]: a handler slower than the session keeps its partitions (the client's
//!   background heartbeat).
//!
//! Every wait is for a condition with a generous deadline (the deadline only bounds failure).
//! Member output is the CLI contract's (see `spool_tests::group_consumer`).

mod admin;
mod deletes;
mod fencing;
mod membership;
mod offsets;
mod slow_handler;

use spool_tests::group_consumer::GroupConsumer;
use spool_tests::{Broker, BrokerOptions};

/// Partitions of the topic the membership tests share out.
const PARTITIONS: i32 = 12;
/// No initial rebalance delay: Kafka's default waits 3 s for more members before a new group's
/// first generation.
const BROKER_FLAGS: [&str; 2] = ["--group-initial-rebalance-delay-ms", "0"];

fn broker() -> Broker {
    let mut options = BrokerOptions::default();
    options.extra_args.extend(BROKER_FLAGS.map(String::from));
    Broker::start_with(options)
}

/// Fails listing `violations` and the members' state (their rebalance and commit lines tell
/// where a duplicate came from).
fn assert_none(what: &str, violations: &[String], members: &[&GroupConsumer]) {
    if !violations.is_empty() {
        for m in members {
            eprintln!("{}", m.summary());
        }
    }
    spool_tests::checker::assert_none(what, violations);
}
