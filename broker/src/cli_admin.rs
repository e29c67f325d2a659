//! The console tools' changes past create/delete, each one admin operation with Kafka's errors
//! turned into one line: `spool topic add-partitions|alter-config|delete-records|elect-leaders`
//! and `spool group delete|delete-offsets`.
//!
//! Promises: nothing is changed before the cluster answered within `--timeout-ms` (the
//! connection is [`errors::admin_for_changes`]'s); a refusal names its cause (INVALID_PARTITIONS
//! with the current count, INVALID_CONFIG with the reason, OFFSET_OUT_OF_RANGE with the high
//! watermark, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC) and exits non-zero.

use spool_protocol::client::admin::{AdminOp, AdminOutcome, ConfigChange, PartitionResult};
use spool_protocol::client::blocking::Admin;
use spool_protocol::client::{ClientError, TopicPartition};
use spool_protocol::ErrorCode;

use super::errors::{self, explain, explain_topic};
use super::Brokers;

/// How long the broker may take to carry out a change (passed in the request).
const BROKER_TIMEOUT_MS: i32 = 30_000;

fn run(b: &Brokers, admin: &mut Admin, op: AdminOp) -> Result<AdminOutcome, String> {
    admin.run(op).map_err(|e| explain(b, &e))
}

fn unexpected(o: &AdminOutcome) -> String {
    format!("unexpected answer from the broker: {o:?}")
}

/// `spool topic add-partitions T --to N`.
pub fn add_partitions(b: &Brokers, topic: &str, count: i32) -> Result<(), String> {
    let mut admin = errors::admin_for_changes(b)?;
    let before = partition_count(b, &mut admin, topic)?;
    let op = AdminOp::CreatePartitions {
        topic: topic.to_owned(),
        count,
        validate_only: false,
        timeout_ms: BROKER_TIMEOUT_MS,
    };
    match run(b, &mut admin, op)? {
        AdminOutcome::CreatePartitions(results) => {
            for (name, r) in results {
                r.map_err(|e| format!("cannot add partitions: {}", explain_topic(b, &name, &e)))?;
            }
        }
        other => return Err(unexpected(&other)),
    }
    println!("topic {topic} now has {count} partitions (had {before})");
    // As Kafka's docs warn: keyed records hash over the partition count.
    println!(
        "note: records with a key now map to different partitions than before; per-key order \
         holds only among records written after this change"
    );
    Ok(())
}

fn partition_count(b: &Brokers, admin: &mut Admin, topic: &str) -> Result<usize, String> {
    let described = admin
        .describe_topics(vec![topic.to_owned()])
        .map_err(|e| explain(b, &e))?;
    let (name, r) = described
        .into_iter()
        .next()
        .ok_or_else(|| format!("topic {topic}: the broker described nothing"))?;
    let d = r.map_err(|e| explain_topic(b, &name, &e))?;
    Ok(d.partitions.len())
}

/// Parses `--set k=v` / `--delete k` / `--append k=v` / `--subtract k=v` into changes, in the
/// order: sets, appends, subtracts, deletes.
pub fn config_changes(
    set: &[String],
    append: &[String],
    subtract: &[String],
    delete: &[String],
) -> Result<Vec<ConfigChange>, String> {
    let pair = |flag: &str, s: &str| -> Result<(String, String), String> {
        s.split_once('=')
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .ok_or_else(|| format!("--{flag} wants key=value, got {s:?}"))
    };
    let mut changes = Vec::new();
    for s in set {
        let (k, v) = pair("set", s)?;
        changes.push(ConfigChange::Set(k, v));
    }
    for s in append {
        let (k, v) = pair("append", s)?;
        changes.push(ConfigChange::Append(k, v));
    }
    for s in subtract {
        let (k, v) = pair("subtract", s)?;
        changes.push(ConfigChange::Subtract(k, v));
    }
    changes.extend(delete.iter().map(|k| ConfigChange::Delete(k.clone())));
    if changes.is_empty() {
        return Err("nothing to change: give --set k=v, --delete k, --append or --subtract".into());
    }
    Ok(changes)
}

/// `spool topic alter-config T --set k=v --delete k`.
pub fn alter_config(b: &Brokers, topic: &str, changes: Vec<ConfigChange>) -> Result<(), String> {
    let mut admin = errors::admin_for_changes(b)?;
    let count = changes.len();
    let op = AdminOp::AlterConfigs {
        topic: topic.to_owned(),
        changes,
        validate_only: false,
    };
    match run(b, &mut admin, op)? {
        AdminOutcome::AlterConfigs(results) => {
            for (name, r) in results {
                r.map_err(|e| format!("cannot alter configs: {}", explain_topic(b, &name, &e)))?;
            }
        }
        other => return Err(unexpected(&other)),
    }
    println!("altered {count} config(s) of topic {topic}");
    Ok(())
}

/// `spool topic delete-records T --partition P --before OFFSET` (-1: the high watermark).
pub fn delete_records(b: &Brokers, topic: &str, partition: i32, before: i64) -> Result<(), String> {
    let mut admin = errors::admin_for_changes(b)?;
    let tp = TopicPartition::new(topic, partition);
    let op = AdminOp::DeleteRecords {
        partition: tp.clone(),
        before_offset: before,
        timeout_ms: BROKER_TIMEOUT_MS,
    };
    match admin.run(op) {
        Ok(AdminOutcome::DeleteRecords(low_watermark)) => {
            println!(
                "{tp}: records before offset {low_watermark} deleted (log start {low_watermark})"
            );
            Ok(())
        }
        Ok(other) => Err(unexpected(&other)),
        Err(e) if e.error_code() == Some(ErrorCode::OffsetOutOfRange) => Err(format!(
            "cannot delete records of {tp} before {before}: past its high watermark \
             (-1 deletes everything committed)"
        )),
        Err(e) => Err(format!(
            "cannot delete records: {}",
            explain_topic(b, topic, &e)
        )),
    }
}

/// `spool topic elect-leaders [T [--partition P]] [--unclean]`.
pub fn elect_leaders(
    b: &Brokers,
    topic: Option<&str>,
    partition: Option<i32>,
    unclean: bool,
) -> Result<(), String> {
    let mut admin = errors::admin_for_changes(b)?;
    let partitions = match (topic, partition) {
        (None, Some(_)) => return Err("--partition needs a topic".into()),
        (None, None) => None,
        (Some(t), Some(p)) => Some(vec![TopicPartition::new(t, p)]),
        (Some(t), None) => {
            let count = partition_count(b, &mut admin, t)?;
            Some(
                (0..count as i32)
                    .map(|p| TopicPartition::new(t, p))
                    .collect(),
            )
        }
    };
    let op = AdminOp::ElectLeaders {
        unclean,
        partitions,
        timeout_ms: BROKER_TIMEOUT_MS,
    };
    let results = match run(b, &mut admin, op)? {
        AdminOutcome::ElectLeaders(r) => r,
        other => return Err(unexpected(&other)),
    };
    print_partition_results(&results, "leader elected", |code| {
        code == ErrorCode::ElectionNotNeeded
    })
}

/// One line per partition; fails when any failed (other than where `benign` says so).
fn print_partition_results(
    results: &[PartitionResult],
    ok: &str,
    benign: impl Fn(ErrorCode) -> bool,
) -> Result<(), String> {
    let mut failed = 0;
    for (tp, r) in results {
        match r {
            Ok(()) => println!("{tp}: {ok}"),
            Err(e) if e.error_code().is_some_and(&benign) => match e.error_code() {
                Some(code) => println!("{tp}: nothing to do ({})", code.name()),
                None => println!("{tp}: {e}"),
            },
            // The error names the partition itself.
            Err(e) => {
                failed += 1;
                eprintln!("{e}");
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} partitions failed", results.len()));
    }
    Ok(())
}

/// `spool group delete G`.
pub fn delete_group(b: &Brokers, group: &str) -> Result<(), String> {
    let mut admin = errors::admin_for_changes(b)?;
    let op = AdminOp::DeleteGroup {
        group_id: group.to_owned(),
    };
    match run(b, &mut admin, op)? {
        AdminOutcome::DeleteGroup(Ok(())) => {
            println!("deleted group {group} and its committed offsets");
            Ok(())
        }
        AdminOutcome::DeleteGroup(Err(e)) => Err(group_refusal(group, &e)),
        other => Err(unexpected(&other)),
    }
}

fn group_refusal(group: &str, e: &ClientError) -> String {
    match e.error_code() {
        Some(ErrorCode::NonEmptyGroup) => format!(
            "cannot change group {group}: it has active members (stop its consumers first; \
             `spool group describe {group}` lists them)"
        ),
        Some(ErrorCode::GroupIdNotFound) => format!("group {group} does not exist"),
        _ => format!("group {group}: {e}"),
    }
}

/// `spool group delete-offsets G --topic T`: every partition of the topic.
pub fn delete_offsets(b: &Brokers, group: &str, topic: &str) -> Result<(), String> {
    let mut admin = errors::admin_for_changes(b)?;
    let count = partition_count(b, &mut admin, topic)?;
    let op = AdminOp::DeleteOffsets {
        group_id: group.to_owned(),
        partitions: (0..count as i32)
            .map(|p| TopicPartition::new(topic, p))
            .collect(),
    };
    let results = match run(b, &mut admin, op)? {
        AdminOutcome::DeleteOffsets(Ok(r)) => r,
        AdminOutcome::DeleteOffsets(Err(e)) => return Err(group_refusal(group, &e)),
        other => return Err(unexpected(&other)),
    };
    if let Some((_, Err(e))) = results.iter().find(
        |(_, r)| matches!(r, Err(e) if e.error_code() == Some(ErrorCode::GroupSubscribedToTopic)),
    ) {
        return Err(format!(
            "cannot delete group {group}'s offsets of {topic}: members are subscribed to it ({e})"
        ));
    }
    print_partition_results(&results, "committed offset deleted", |_| false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_flags_become_changes_in_order() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let changes = config_changes(
            &s(&["retention.ms=1000"]),
            &s(&["cleanup.policy=compact"]),
            &[],
            &s(&["segment.bytes"]),
        )
        .unwrap();
        assert_eq!(
            changes,
            vec![
                ConfigChange::Set("retention.ms".into(), "1000".into()),
                ConfigChange::Append("cleanup.policy".into(), "compact".into()),
                ConfigChange::Delete("segment.bytes".into()),
            ]
        );
        assert!(config_changes(&s(&["retention.ms"]), &[], &[], &[])
            .unwrap_err()
            .contains("key=value"));
        assert!(config_changes(&[], &[], &[], &[]).is_err());
    }
}
