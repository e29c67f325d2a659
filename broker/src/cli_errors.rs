//! The console tools' error lines: a client library error turned into one line a user can act on
//! — the topic does not exist (and how to create it), the broker is unreachable at the address
//! given, no broker answered in time, not authorized — and the bounded admin connections every
//! command starts from.
//!
//! Promises: every command's first contact with the cluster is bounded by `--timeout-ms`; a
//! change (topic create/delete, offsets reset) then gets [`CHANGE_TIMEOUT_MS`] to be carried
//! out, since it waits for the controller. Never retries itself: the library retries what is
//! retriable within those bounds, and this module only names what was left.

use spool_protocol::client::admin::AdminConfig;
use spool_protocol::client::blocking::Admin;
use spool_protocol::client::ClientError;
use spool_protocol::ErrorCode;

use super::{bootstrap, Brokers};

/// How long a change (create, delete, reset offsets) may take once the broker answered: the
/// broker itself waits up to 30 s for the controller to apply a CreateTopics.
pub const CHANGE_TIMEOUT_MS: u64 = 30_000;

/// The line for `e`, met while talking to `b`.
pub fn explain(b: &Brokers, e: &ClientError) -> String {
    match e {
        ClientError::Connection(cause) => {
            format!("broker unreachable at {} ({cause})", b.brokers)
        }
        ClientError::Timeout { what, timeout_ms } => format!(
            "no answer from {} within {timeout_ms} ms ({what}); is a spool broker listening \
             there? (--timeout-ms waits longer)",
            b.brokers
        ),
        ClientError::Broker { code, context } if is_authorization(*code) => {
            format!("not authorized: {context} ({code})")
        }
        other => other.to_string(),
    }
}

/// The line for `e`, met while working on `topic`.
pub fn explain_topic(b: &Brokers, topic: &str, e: &ClientError) -> String {
    match e.error_code() {
        Some(ErrorCode::UnknownTopicOrPartition) => unknown_topic(topic),
        _ => format!("topic {topic}: {}", explain(b, e)),
    }
}

/// The native protocol never creates a topic on first use (its Metadata requests do not allow
/// it), whatever `--auto-create-topics` says for the Kafka port.
pub fn unknown_topic(topic: &str) -> String {
    format!(
        "topic {topic} does not exist (topics are not created on first use); create it with: \
         spool topic create {topic}"
    )
}

fn is_authorization(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::TopicAuthorizationFailed
            | ErrorCode::GroupAuthorizationFailed
            | ErrorCode::ClusterAuthorizationFailed
            | ErrorCode::TransactionalIdAuthorizationFailed
            | ErrorCode::DelegationTokenAuthorizationFailed
    )
}

fn admin_with(b: &Brokers, timeout_ms: u64) -> Result<Admin, String> {
    let config = AdminConfig {
        request_timeout_ms: timeout_ms,
        operation_timeout_ms: timeout_ms,
        ..AdminConfig::default()
    };
    Admin::new(&bootstrap(b), config).map_err(|e| explain(b, &e))
}

/// An admin connection for reading (metadata, listings, descriptions): every operation ends
/// within about `--timeout-ms` (one request's bound past the operation's, at most).
pub fn admin(b: &Brokers) -> Result<Admin, String> {
    admin_with(b, b.timeout_ms)
}

/// An admin connection for a change: first a metadata round trip bounded by `--timeout-ms`
/// (an unreachable broker is reported then, not after [`CHANGE_TIMEOUT_MS`]), then an admin
/// whose operations may take [`CHANGE_TIMEOUT_MS`].
pub fn admin_for_changes(b: &Brokers) -> Result<Admin, String> {
    admin(b)?.describe_cluster().map_err(|e| explain(b, &e))?;
    admin_with(b, b.timeout_ms.max(CHANGE_TIMEOUT_MS))
}

/// Checks that every topic exists, within `--timeout-ms`.
pub fn require_topics(b: &Brokers, topics: &[&str]) -> Result<(), String> {
    let names = topics.iter().map(|t| (*t).to_owned()).collect();
    let described = admin(b)?
        .describe_topics(names)
        .map_err(|e| explain(b, &e))?;
    for (name, r) in described {
        r.map_err(|e| explain_topic(b, &name, &e))?;
    }
    Ok(())
}
