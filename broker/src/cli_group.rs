//! `spool consume TOPIC --group G` and `spool group list|describe|reset-offsets`: consumer groups
//! from the command line, on the client library's `Consumer::subscribe` and group admin calls.
//!
//! The contract the process tests hold it to (issue #6):
//! - stdout: one line per record (`--format json`: topic, partition, offset, timestamp, key,
//!   value), flushed per line;
//! - stderr: `revoked generation=<G> partitions=<t-p,…>`, `assigned generation=<G>
//!   partitions=<t-p,…>` (the partitions added) for every rebalance callback, and
//!   `committed partitions=<t-p@offset,…>` after every successful commit; no other stderr line
//!   starts with those words;
//! - processes then commits: the committed offset of a partition is the one after the last
//!   record printed and flushed; `-n N` and SIGTERM/SIGINT commit, leave (unless static) and
//!   exit 0.
//!
//! `group describe` reports lag per partition: messages (high watermark − committed) and seconds
//! (now − the timestamp of the first unconsumed record, 0 when caught up). A partition with no
//! committed offset shows committed -1 and lags from the log start. `generation` is the one
//! DescribeGroups reports (-1 for an unknown group).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use spool_protocol::client::blocking::Consumer;
use spool_protocol::client::consumer::{ConsumerConfig, OffsetReset, SeekTo};
use spool_protocol::client::group::{Assignor, CommitKind, RebalanceListener};
use spool_protocol::client::{ClientError, TopicPartition};

use super::{
    admin, bootstrap, explain, explain_topic, format_record, json_string, Brokers, ConsumeArgs,
    Format,
};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AssignorArg {
    Range,
    #[value(name = "roundrobin")]
    RoundRobin,
    #[value(name = "cooperative-sticky")]
    CooperativeSticky,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ResetArg {
    Earliest,
    Latest,
}

/// `spool consume` flags for group consumption.
#[derive(Debug, Args)]
pub struct GroupArgs {
    /// Consume as a member of this consumer group (offsets committed to the group).
    #[arg(long)]
    pub group: Option<String>,
    /// A static member id (Kafka group.instance.id): restarts within the session keep the
    /// assignment, and closing sends no LeaveGroup.
    #[arg(long, requires = "group")]
    pub group_instance_id: Option<String>,
    #[arg(long, value_enum, default_value = "range", requires = "group")]
    pub assignor: AssignorArg,
    #[arg(long, default_value_t = 45_000)]
    pub session_timeout_ms: u64,
    #[arg(long, default_value_t = 3_000)]
    pub heartbeat_interval_ms: u64,
    #[arg(long, default_value_t = 300_000)]
    pub max_poll_interval_ms: u64,
    #[arg(long, default_value_t = 5_000)]
    pub auto_commit_interval_ms: u64,
    /// Where to start a partition the group has no committed offset for (auto.offset.reset).
    #[arg(long, value_enum, default_value = "earliest")]
    pub reset: ResetArg,
}

#[derive(Debug, Subcommand)]
pub enum GroupCmd {
    /// List consumer groups with their state.
    List {
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Members, assignment, committed offsets and lag of a group.
    Describe {
        group: String,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Move a group's committed offsets for a topic (refused while the group has members).
    #[command(group(ArgGroup::new("target").required(true).args(["to_earliest", "to_latest", "to_offset", "to_timestamp"])))]
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        to_earliest: bool,
        #[arg(long)]
        to_latest: bool,
        #[arg(long)]
        to_offset: Option<i64>,
        /// The first offset at or after this time (ms since the epoch).
        #[arg(long)]
        to_timestamp: Option<i64>,
    },
    /// Delete an empty group and its committed offsets (refused while it has members).
    Delete { group: String },
    /// Delete a group's committed offsets of a topic (refused while members subscribe to it).
    DeleteOffsets {
        group: String,
        #[arg(long)]
        topic: String,
    },
}

fn tp_list(tps: &[TopicPartition]) -> String {
    let mut v: Vec<&TopicPartition> = tps.iter().collect();
    v.sort();
    v.iter()
        .map(|tp| tp.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Prints the contract's stderr lines.
struct StderrListener;

impl RebalanceListener for StderrListener {
    fn on_assigned(&mut self, generation: i32, partitions: &[TopicPartition]) {
        eprintln!(
            "assigned generation={generation} partitions={}",
            tp_list(partitions)
        );
    }

    fn on_revoked(&mut self, generation: i32, partitions: &[TopicPartition]) {
        eprintln!(
            "revoked generation={generation} partitions={}",
            tp_list(partitions)
        );
    }

    fn on_commit(
        &mut self,
        kind: CommitKind,
        result: Result<&[(TopicPartition, i64)], &ClientError>,
    ) {
        match result {
            Ok([]) => {} // nothing was left to commit
            Ok(offsets) => {
                let mut v: Vec<&(TopicPartition, i64)> = offsets.iter().collect();
                v.sort();
                let list: Vec<String> = v.iter().map(|(tp, o)| format!("{tp}@{o}")).collect();
                eprintln!("committed partitions={}", list.join(","));
            }
            Err(e) => eprintln!("spool: {kind:?} commit failed: {e}"),
        }
    }
}

/// `spool consume TOPIC[,TOPIC…] --group G`.
pub fn consume_group(b: &Brokers, a: &ConsumeArgs) -> Result<(), String> {
    let g = &a.group;
    let group = g.group.clone().unwrap_or_default();
    let config = ConsumerConfig {
        client_id: "spool-consume".into(),
        group_id: Some(group.clone()),
        group_instance_id: g.group_instance_id.clone(),
        assignor: match g.assignor {
            AssignorArg::Range => Assignor::Range,
            AssignorArg::RoundRobin => Assignor::RoundRobin,
            AssignorArg::CooperativeSticky => Assignor::CooperativeSticky,
        },
        session_timeout_ms: g.session_timeout_ms,
        heartbeat_interval_ms: g.heartbeat_interval_ms,
        max_poll_interval_ms: g.max_poll_interval_ms,
        auto_commit: true,
        auto_commit_interval_ms: g.auto_commit_interval_ms,
        auto_offset_reset: match g.reset {
            ResetArg::Earliest => OffsetReset::Earliest,
            ResetArg::Latest => OffsetReset::Latest,
        },
        isolation_level: a.isolation_level.level(),
        ..ConsumerConfig::default()
    };
    let topics: Vec<&str> = a
        .topic
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    // A group never gets partitions of a topic that does not exist: say so within
    // --timeout-ms instead of waiting in the group for ever.
    super::errors::require_topics(b, &topics)?;
    crate::stop_signal::install();
    let mut consumer = Consumer::new(&bootstrap(b), config).map_err(|e| explain(b, &e))?;
    consumer
        .subscribe(&topics, StderrListener)
        .map_err(|e| format!("subscribe to {}: {}", a.topic, explain(b, &e)))?;
    let mut seen = 0u64;
    let mut idle_ms = 0u64;
    let out = std::io::stdout();
    let mut out = out.lock();
    while !crate::stop_signal::requested() && a.num.is_none_or(|n| seen < n) {
        if let Some(n) = a.num {
            // Never take more than will be printed: what poll returned counts as processed.
            consumer.max_poll_records = usize::try_from(n - seen).unwrap_or(usize::MAX).min(500);
        }
        let records = consumer
            .poll(200)
            .map_err(|e| format!("group {group}: {e}"))?;
        if records.is_empty() {
            idle_ms += 200;
            if a.idle_timeout_ms.is_some_and(|t| idle_ms >= t) {
                break;
            }
            continue;
        }
        idle_ms = 0;
        for r in records {
            seen += 1;
            writeln!(out, "{}", format_record(&r, a.format)).map_err(|e| format!("stdout: {e}"))?;
            out.flush().map_err(|e| format!("stdout: {e}"))?;
        }
    }
    consumer
        .close()
        .map_err(|e| format!("leaving group {group}: {e}"))
}

pub fn group(b: &Brokers, cmd: GroupCmd) -> Result<(), String> {
    match cmd {
        GroupCmd::List { format } => list(b, format),
        GroupCmd::Describe { group, format } => describe(b, &group, format),
        GroupCmd::ResetOffsets {
            group,
            topic,
            to_earliest,
            to_latest,
            to_offset,
            to_timestamp,
        } => {
            let target = match (to_offset, to_timestamp) {
                (Some(o), _) => SeekTo::Offset(o),
                (_, Some(t)) => SeekTo::Timestamp(t),
                _ if to_latest => SeekTo::Latest,
                _ => {
                    debug_assert!(to_earliest);
                    SeekTo::Earliest
                }
            };
            reset_offsets(b, &group, &topic, target)
        }
        GroupCmd::Delete { group } => super::admin_changes::delete_group(b, &group),
        GroupCmd::DeleteOffsets { group, topic } => {
            super::admin_changes::delete_offsets(b, &group, &topic)
        }
    }
}

fn list(b: &Brokers, format: Format) -> Result<(), String> {
    let groups = admin(b)?
        .list_groups()
        .map_err(|e| format!("list groups: {}", explain(b, &e)))?;
    match format {
        Format::Json => {
            let items: Vec<String> = groups
                .iter()
                .map(|g| {
                    format!(
                        "{{\"group\":{},\"state\":{},\"protocol_type\":{}}}",
                        js(&g.group_id),
                        js(&g.state),
                        js(&g.protocol_type)
                    )
                })
                .collect();
            println!("[{}]", items.join(","));
        }
        Format::Text => {
            println!("{:<32}  {:<20}  PROTOCOL-TYPE", "GROUP", "STATE");
            for g in groups {
                println!("{:<32}  {:<20}  {}", g.group_id, g.state, g.protocol_type);
            }
        }
    }
    Ok(())
}

fn js(s: &str) -> String {
    json_string(&Some(Bytes::from(s.to_owned())))
}

/// A partition's offsets in `describe`.
struct Lag {
    tp: TopicPartition,
    committed: i64,
    high_watermark: i64,
    lag_messages: i64,
    lag_seconds: f64,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// How long `describe` waits for the first unconsumed record of the lagging partitions.
const LAG_LOOKUP_TIMEOUT_MS: u64 = 5_000;

/// High watermark, start (committed or log start) and lag of each partition.
fn lags(b: &Brokers, committed: &BTreeMap<TopicPartition, i64>) -> Result<Vec<Lag>, String> {
    if committed.is_empty() {
        return Ok(Vec::new());
    }
    let mut consumer = Consumer::new(&bootstrap(b), ConsumerConfig::default())
        .map_err(|e| format!("cannot reach {}: {e}", b.brokers))?;
    let tps: Vec<TopicPartition> = committed.keys().cloned().collect();
    consumer.assign(tps.clone());
    let position = |c: &mut Consumer, tp: &TopicPartition, to: SeekTo| -> Result<i64, String> {
        c.seek(tp, to).map_err(|e| e.to_string())?;
        c.position(tp, 10_000)
            .map_err(|e| format!("offsets of {tp}: {e}"))
    };
    let mut out = Vec::new();
    for tp in &tps {
        let hw = position(&mut consumer, tp, SeekTo::Latest)?;
        let committed = committed[tp];
        let start = if committed >= 0 {
            committed
        } else {
            position(&mut consumer, tp, SeekTo::Earliest)?
        };
        out.push(Lag {
            tp: tp.clone(),
            committed,
            high_watermark: hw,
            lag_messages: (hw - start).max(0),
            lag_seconds: 0.0,
        });
    }
    // The first unconsumed record of each lagging partition, for the lag in seconds.
    let mut waiting: BTreeMap<TopicPartition, usize> = BTreeMap::new();
    for (i, l) in out.iter().enumerate() {
        if l.lag_messages > 0 {
            let start = l.high_watermark - l.lag_messages;
            consumer
                .seek(&l.tp, SeekTo::Offset(start))
                .map_err(|e| e.to_string())?;
            waiting.insert(l.tp.clone(), i);
        } else {
            consumer.pause(&l.tp).map_err(|e| e.to_string())?;
        }
    }
    let deadline = Instant::now() + Duration::from_millis(LAG_LOOKUP_TIMEOUT_MS);
    while !waiting.is_empty() && Instant::now() < deadline {
        for r in consumer.poll(200).map_err(|e| format!("fetch: {e}"))? {
            let tp = TopicPartition::new(r.topic.clone(), r.partition);
            if let Some(i) = waiting.remove(&tp) {
                out[i].lag_seconds = ((now_ms() - r.timestamp_ms).max(1)) as f64 / 1000.0;
                let _ = consumer.pause(&tp);
            }
        }
    }
    Ok(out)
}

fn describe(b: &Brokers, group: &str, format: Format) -> Result<(), String> {
    let mut admin = admin(b)?;
    let d = admin
        .describe_group(group)
        .map_err(|e| format!("describe group {group}: {}", explain(b, &e)))?;
    let mut committed: BTreeMap<TopicPartition, i64> = admin
        .fetch_offsets(group, None)
        .map_err(|e| format!("committed offsets of {group}: {}", explain(b, &e)))?
        .into_iter()
        .filter(|(_, o)| *o >= 0)
        .collect();
    for m in &d.members {
        for tp in &m.assignment {
            committed.entry(tp.clone()).or_insert(-1);
        }
    }
    let lags = lags(b, &committed)?;
    match format {
        Format::Json => {
            let members: Vec<String> = d
                .members
                .iter()
                .map(|m| {
                    let mut a: Vec<&TopicPartition> = m.assignment.iter().collect();
                    a.sort();
                    let a: Vec<String> = a.iter().map(|tp| js(&tp.to_string())).collect();
                    format!(
                        "{{\"member_id\":{},\"group_instance_id\":{},\"client_id\":{},\"host\":{},\"assignment\":[{}]}}",
                        js(&m.member_id),
                        m.group_instance_id.as_deref().map_or("null".into(), js),
                        js(&m.client_id),
                        js(&m.host),
                        a.join(",")
                    )
                })
                .collect();
            let offsets: Vec<String> = lags
                .iter()
                .map(|l| {
                    format!(
                        "{{\"topic\":{},\"partition\":{},\"committed\":{},\"high_watermark\":{},\"lag_messages\":{},\"lag_seconds\":{:.3}}}",
                        js(&l.tp.topic),
                        l.tp.partition,
                        l.committed,
                        l.high_watermark,
                        l.lag_messages,
                        l.lag_seconds
                    )
                })
                .collect();
            println!(
                "{{\"group\":{},\"state\":{},\"protocol\":{},\"generation\":{},\"members\":[{}],\"offsets\":[{}]}}",
                js(&d.group_id),
                js(&d.state),
                js(&d.protocol),
                d.generation,
                members.join(","),
                offsets.join(",")
            );
        }
        Format::Text => {
            println!(
                "group {} state {} protocol {} generation {} ({} members)",
                d.group_id,
                d.state,
                if d.protocol.is_empty() {
                    "-"
                } else {
                    &d.protocol
                },
                d.generation,
                d.members.len()
            );
            if !d.members.is_empty() {
                println!(
                    "\n{:<48}  {:<16}  {:<16}  ASSIGNMENT",
                    "MEMBER", "INSTANCE", "CLIENT"
                );
                for m in &d.members {
                    println!(
                        "{:<48}  {:<16}  {:<16}  {}",
                        m.member_id,
                        m.group_instance_id.as_deref().unwrap_or("-"),
                        m.client_id,
                        tp_list(&m.assignment)
                    );
                }
            }
            println!(
                "\n{:<24}  {:>9}  {:>12}  {:>14}  {:>12}  {:>11}",
                "TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG", "LAG-SECONDS"
            );
            for l in &lags {
                println!(
                    "{:<24}  {:>9}  {:>12}  {:>14}  {:>12}  {:>11.3}",
                    l.tp.topic,
                    l.tp.partition,
                    l.committed,
                    l.high_watermark,
                    l.lag_messages,
                    l.lag_seconds
                );
            }
        }
    }
    Ok(())
}

fn reset_offsets(b: &Brokers, group: &str, topic: &str, target: SeekTo) -> Result<(), String> {
    let mut admin = super::errors::admin_for_changes(b)?;
    let d = admin
        .describe_group(group)
        .map_err(|e| format!("describe group {group}: {}", explain(b, &e)))?;
    if !d.members.is_empty() {
        return Err(format!(
            "group {group} has {} active member(s) (state {}); stop them before resetting its offsets",
            d.members.len(),
            d.state
        ));
    }
    let (_, described) = admin
        .describe_topics(vec![topic.to_owned()])
        .map_err(|e| explain(b, &e))?
        .into_iter()
        .next()
        .ok_or("no answer for the topic")?;
    let described = described.map_err(|e| explain_topic(b, topic, &e))?;
    let tps: Vec<TopicPartition> = described
        .partitions
        .iter()
        .map(|p| TopicPartition::new(topic, p.partition))
        .collect();
    let mut consumer = Consumer::new(&bootstrap(b), ConsumerConfig::default())
        .map_err(|e| format!("cannot reach {}: {e}", b.brokers))?;
    consumer.assign(tps.clone());
    let mut offsets = Vec::with_capacity(tps.len());
    for tp in &tps {
        let mut at = |to: SeekTo| -> Result<i64, String> {
            consumer.seek(tp, to).map_err(|e| e.to_string())?;
            consumer
                .position(tp, 10_000)
                .map_err(|e| format!("offsets of {tp}: {e}"))
        };
        let offset = match target {
            // Kafka's tool clamps an explicit offset into the log.
            SeekTo::Offset(o) => o.clamp(at(SeekTo::Earliest)?, at(SeekTo::Latest)?),
            other => at(other)?,
        };
        offsets.push((tp.clone(), offset));
    }
    let results = admin
        .commit_offsets(group, offsets.clone())
        .map_err(|e| format!("commit offsets of {group}: {e}"))?;
    let failed: BTreeSet<String> = results
        .iter()
        .filter_map(|(tp, r)| r.as_ref().err().map(|e| format!("{tp}: {e}")))
        .collect();
    if !failed.is_empty() {
        return Err(format!(
            "group {group}: offsets not reset (has it members?): {}",
            failed.into_iter().collect::<Vec<_>>().join("; ")
        ));
    }
    println!("{:<24}  {:>9}  NEW-OFFSET", "TOPIC", "PARTITION");
    for (tp, o) in offsets {
        println!("{:<24}  {:>9}  {o}", tp.topic, tp.partition);
    }
    Ok(())
}
