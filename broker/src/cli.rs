//! `spool topic|produce|consume|cluster`: console tools in the style of `rpk`, on the native
//! protocol's blocking client. Every command takes `--brokers HOST:PORT` (default
//! 127.0.0.1:9093) and `--timeout-ms` (default 5000: how long reaching the cluster and reading
//! its metadata may take); an error prints one human line on stderr ([`errors`]) and exits
//! non-zero. `spool consume --group` and `spool group …` live in [`group`] (`cli_group.rs`),
//! `spool txn …` in [`txn`] (`cli_txn.rs`).

#[path = "cli_admin.rs"]
pub mod admin_changes;
#[path = "cli_errors.rs"]
pub mod errors;
#[path = "cli_group.rs"]
pub mod group;
#[path = "cli_txn.rs"]
pub mod txn;

use std::io::{BufRead, Write};

use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use spool_protocol::client::admin::{AdminConfig, NewTopic};

pub(crate) use errors::{admin, explain, explain_topic};
use spool_protocol::client::blocking::{Admin, Consumer, DeliveryFuture, Producer};
use spool_protocol::client::consumer::{ConsumerConfig, SeekTo};
use spool_protocol::client::producer::{Acks, ProducerConfig};
use spool_protocol::client::{ProducerRecord, TopicPartition};
use spool_protocol::ErrorCode;

#[derive(Debug, Clone, Args)]
pub struct Brokers {
    /// Broker to bootstrap from.
    #[arg(
        long,
        global = true,
        env = "SPOOL_BROKERS",
        default_value = "127.0.0.1:9093"
    )]
    pub brokers: String,
    /// How long a command waits for the broker to answer (connecting, metadata, listings);
    /// changes then get at least 30000 ms to be carried out.
    #[arg(long, global = true, env = "SPOOL_TIMEOUT_MS", default_value_t = 5_000)]
    pub timeout_ms: u64,
}

#[derive(Debug, Subcommand)]
pub enum TopicCmd {
    /// Create a topic.
    Create {
        name: String,
        #[arg(long, short = 'p', default_value_t = 1)]
        partitions: i32,
        #[arg(long, short = 'r', default_value_t = -1)]
        replication_factor: i16,
        /// A topic config, Kafka's name: --config retention.ms=60000 (repeatable).
        #[arg(long = "config", short = 'c')]
        configs: Vec<String>,
    },
    /// Delete a topic and its data.
    Delete { name: String },
    /// List topics.
    List,
    /// Show a topic's partitions, leaders and in-sync replicas.
    Describe { name: String },
    /// Grow a topic to N partitions. Keyed records then map to other partitions.
    AddPartitions {
        name: String,
        /// The partition count wanted in all.
        #[arg(long)]
        to: i32,
    },
    /// Change a topic's configs (Kafka's names): --set retention.ms=60000 --delete segment.bytes.
    AlterConfig {
        name: String,
        /// Set a config: key=value (repeatable).
        #[arg(long)]
        set: Vec<String>,
        /// Return a config to its default (repeatable).
        #[arg(long)]
        delete: Vec<String>,
        /// Add an element to a list config: cleanup.policy=compact (repeatable).
        #[arg(long)]
        append: Vec<String>,
        /// Remove an element from a list config (repeatable).
        #[arg(long)]
        subtract: Vec<String>,
    },
    /// Delete a partition's records before an offset (-1: the high watermark).
    DeleteRecords {
        name: String,
        #[arg(long)]
        partition: i32,
        #[arg(long, allow_hyphen_values = true)]
        before: i64,
    },
    /// Move leadership back to each partition's preferred replica (the first listed), or with
    /// --unclean give a leaderless partition any live replica (may lose acknowledged records).
    ElectLeaders {
        /// Only this topic's partitions (default: every partition).
        name: Option<String>,
        #[arg(long)]
        partition: Option<i32>,
        #[arg(long)]
        unclean: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AcksArg {
    #[value(name = "0")]
    Zero,
    #[value(name = "1")]
    One,
    All,
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    pub topic: String,
    /// Split each line into key and value at the first SEP.
    #[arg(long)]
    pub key_separator: Option<String>,
    #[arg(long, value_enum, default_value = "all")]
    pub acks: AcksArg,
    /// Send every line to this partition instead of partitioning by key.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Print partition and offset of every acknowledged line.
    #[arg(short, long)]
    pub verbose: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// The topic (with --group: a comma-separated list).
    pub topic: String,
    /// earliest | latest | OFFSET | @TIMESTAMP_MS
    #[arg(long, default_value = "earliest", conflicts_with = "group")]
    pub from: String,
    /// Stop after N records (default: run until interrupted).
    #[arg(short = 'n', long)]
    pub num: Option<u64>,
    /// Only this partition (default: every partition).
    #[arg(long, conflicts_with = "group")]
    pub partition: Option<i32>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Stop when no record arrives for this long (default: wait forever).
    #[arg(long)]
    pub idle_timeout_ms: Option<u64>,
    /// read_committed: only committed transactions' records, up to the last stable offset
    /// (Kafka's `isolation.level`).
    #[arg(long, value_enum, default_value = "read-uncommitted")]
    pub isolation_level: IsolationArg,
    #[command(flatten)]
    pub group: group::GroupArgs,
}

/// `--isolation-level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    #[value(alias = "read_uncommitted")]
    ReadUncommitted,
    #[value(alias = "read_committed")]
    ReadCommitted,
}

impl IsolationArg {
    pub(crate) fn level(self) -> spool_protocol::wire::IsolationLevel {
        match self {
            IsolationArg::ReadUncommitted => spool_protocol::wire::IsolationLevel::ReadUncommitted,
            IsolationArg::ReadCommitted => spool_protocol::wire::IsolationLevel::ReadCommitted,
        }
    }
}

pub(crate) fn bootstrap(b: &Brokers) -> Vec<&str> {
    b.brokers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// How long `cluster info` waits for one broker's own view before calling it unreachable.
const BROKER_VIEW_TIMEOUT_MS: u64 = 3_000;

/// An admin connection to `b` that gives up after [`BROKER_VIEW_TIMEOUT_MS`], or `None` when
/// it cannot be reached (for per-broker views: one broker down must not stall the listing).
fn admin_quietly(b: &Brokers) -> Option<Admin> {
    let config = AdminConfig {
        request_timeout_ms: BROKER_VIEW_TIMEOUT_MS,
        operation_timeout_ms: BROKER_VIEW_TIMEOUT_MS,
        ..AdminConfig::default()
    };
    Admin::new(&bootstrap(b), config).ok()
}

pub fn topic(b: &Brokers, cmd: TopicCmd) -> Result<(), String> {
    match cmd {
        TopicCmd::AddPartitions { name, to } => admin_changes::add_partitions(b, &name, to),
        TopicCmd::AlterConfig {
            name,
            set,
            delete,
            append,
            subtract,
        } => {
            let changes = admin_changes::config_changes(&set, &append, &subtract, &delete)?;
            admin_changes::alter_config(b, &name, changes)
        }
        TopicCmd::DeleteRecords {
            name,
            partition,
            before,
        } => admin_changes::delete_records(b, &name, partition, before),
        TopicCmd::ElectLeaders {
            name,
            partition,
            unclean,
        } => admin_changes::elect_leaders(b, name.as_deref(), partition, unclean),
        cmd => topic_basic(b, cmd),
    }
}

/// Create, delete, list and describe.
fn topic_basic(b: &Brokers, cmd: TopicCmd) -> Result<(), String> {
    let mut admin = match &cmd {
        TopicCmd::Create { .. } | TopicCmd::Delete { .. } => errors::admin_for_changes(b)?,
        _ => admin(b)?,
    };
    match cmd {
        TopicCmd::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
            let mut t = NewTopic::new(name.clone(), partitions, replication_factor);
            for c in configs {
                let Some((k, v)) = c.split_once('=') else {
                    return Err(format!("--config wants key=value, got {c:?}"));
                };
                t.configs.push((k.to_string(), v.to_string()));
            }
            let results = admin.create_topics(vec![t]).map_err(|e| explain(b, &e))?;
            for (name, r) in results {
                r.map_err(|e| format!("cannot create topic {name}: {e}"))?;
                println!("created topic {name} ({partitions} partitions)");
            }
        }
        TopicCmd::Delete { name } => {
            for (name, r) in admin
                .delete_topics(vec![name])
                .map_err(|e| explain(b, &e))?
            {
                r.map_err(|e| match e.error_code() {
                    Some(ErrorCode::UnknownTopicOrPartition) => {
                        format!("cannot delete topic {name}: it does not exist")
                    }
                    _ => format!("cannot delete: {}", explain_topic(b, &name, &e)),
                })?;
                println!("deleted topic {name}");
            }
        }
        TopicCmd::List => {
            for t in admin.list_topics().map_err(|e| explain(b, &e))? {
                println!("{t}");
            }
        }
        // `topic` handles the changes past create and delete.
        TopicCmd::AddPartitions { .. }
        | TopicCmd::AlterConfig { .. }
        | TopicCmd::DeleteRecords { .. }
        | TopicCmd::ElectLeaders { .. } => return topic(b, cmd),
        TopicCmd::Describe { name } => {
            for (name, r) in admin
                .describe_topics(vec![name])
                .map_err(|e| explain(b, &e))?
            {
                let d = r.map_err(|e| explain_topic(b, &name, &e))?;
                println!("topic {} ({} partitions)", d.name, d.partitions.len());
                println!(
                    "PARTITION  LEADER  LEADER-EPOCH      REPLICAS           ISR           ELR  OFFLINE"
                );
                for p in d.partitions {
                    println!(
                        "{:>9}  {:>6}  {:>12}  {:>12}  {:>12}  {:>12}  {:?}",
                        p.partition,
                        p.leader_id,
                        p.leader_epoch,
                        format!("{:?}", p.replicas),
                        format!("{:?}", p.isr),
                        format!("{:?}", p.eligible_leaders),
                        p.offline_replicas
                    );
                }
            }
        }
    }
    Ok(())
}

pub fn cluster_info(b: &Brokers) -> Result<(), String> {
    let mut admin = admin(b)?;
    let cluster = admin.describe_cluster().map_err(|e| explain(b, &e))?;
    println!(
        "cluster {} (asked {})",
        cluster.cluster_id.as_deref().unwrap_or("-"),
        b.brokers
    );
    // Each broker reports the metadata offset it has applied; its lag is how far that is
    // behind the furthest one (asked one by one, so a broker that is down shows as such).
    let views: Vec<Option<spool_protocol::client::admin::QuorumDescription>> = cluster
        .brokers
        .iter()
        .map(|broker| {
            let addr = format!("{}:{}", broker.host, broker.port);
            let one = Brokers {
                brokers: addr,
                timeout_ms: b.timeout_ms,
            };
            admin_quietly(&one).and_then(|mut a| a.describe_cluster().ok()?.quorum)
        })
        .collect();
    let newest = views
        .iter()
        .flatten()
        .map(|q| q.applied_offset)
        .max()
        .unwrap_or(0);
    println!(
        "{:<6} {:<22} {:<6} {:<7} {:<8} {:<9} {:<10}",
        "BROKER", "ADDRESS", "RACK", "EPOCH", "STATE", "METADATA", "LAG"
    );
    for (broker, view) in cluster.brokers.iter().zip(&views) {
        let (applied, lag) = match view {
            Some(q) => (
                q.applied_offset.to_string(),
                (newest - q.applied_offset).to_string(),
            ),
            None => ("-".into(), "unreachable".into()),
        };
        println!(
            "{:<6} {:<22} {:<6} {:<7} {:<8} {:<9} {:<10}",
            broker.node_id,
            format!("{}:{}", broker.host, broker.port),
            broker.rack.as_deref().unwrap_or("-"),
            broker.broker_epoch,
            if broker.fenced { "fenced" } else { "active" },
            applied,
            lag
        );
    }
    match &cluster.quorum {
        Some(q) => {
            let leader = if q.leader_id < 0 {
                "none (an election is under way)".to_string()
            } else {
                q.leader_id.to_string()
            };
            println!(
                "controller {leader}  term {}  commit {}  voters {:?}  learners {:?}",
                q.term, q.commit_index, q.voters, q.learners
            );
        }
        None => println!("controller: not reported by {}", b.brokers),
    }
    let topics = admin.list_topics().map_err(|e| explain(b, &e))?;
    let described = admin
        .describe_topics(topics.clone())
        .map_err(|e| explain(b, &e))?;
    let partitions: usize = described
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .map(|d| d.partitions.len())
        .sum();
    let mut brokers: Vec<i32> = described
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .flat_map(|d| d.partitions.iter().flat_map(|p| p.replicas.clone()))
        .collect();
    brokers.sort_unstable();
    brokers.dedup();
    println!("brokers hosting replicas: {brokers:?}");
    println!("topics: {} ({} partitions)", topics.len(), partitions);
    for t in topics {
        println!("  {t}");
    }
    Ok(())
}

pub fn produce(b: &Brokers, a: ProduceArgs) -> Result<(), String> {
    // Before reading stdin: a missing topic or an unreachable broker is reported within
    // --timeout-ms. The producer keeps the library's bounds (max_block_ms 60 s for metadata
    // and buffer room, delivery_timeout_ms 120 s): a long pipe into a slow broker must not
    // fail at the first full buffer.
    errors::require_topics(b, &[a.topic.as_str()])?;
    let config = ProducerConfig {
        acks: match a.acks {
            AcksArg::Zero => Acks::None,
            AcksArg::One => Acks::Leader,
            AcksArg::All => Acks::All,
        },
        ..ProducerConfig::default()
    };
    let delivery_timeout_ms = config.delivery_timeout_ms;
    let producer = Producer::new(&bootstrap(b), config).map_err(|e| explain(b, &e))?;
    let stdin = std::io::stdin();
    let mut pending = std::collections::VecDeque::new();
    // The first record not delivered ends the command with its cause (one line): the ones
    // after it would mostly fail the same way.
    let report = |d: DeliveryFuture| -> Result<(), String> {
        match d.wait() {
            Ok(m) if a.verbose => println!("{}/{} offset {}", m.topic, m.partition, m.offset),
            Ok(_) => {}
            Err(e) => {
                return Err(format!(
                    "a record was not delivered: {}",
                    explain_topic(b, &a.topic, &e)
                ))
            }
        }
        Ok(())
    };
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        let mut record = match &a.key_separator {
            Some(sep) => match line.split_once(sep.as_str()) {
                Some((k, v)) => ProducerRecord::new(a.topic.clone(), Bytes::from(v.to_string()))
                    .with_key(Bytes::from(k.to_string())),
                None => ProducerRecord::new(a.topic.clone(), Bytes::from(line)),
            },
            None => ProducerRecord::new(a.topic.clone(), Bytes::from(line)),
        };
        if let Some(p) = a.partition {
            record = record.with_partition(p);
        }
        pending.push_back(
            producer
                .send(record)
                .map_err(|e| format!("cannot send: {}", explain_topic(b, &a.topic, &e)))?,
        );
        // Report in order, without holding more than a bounded number of results.
        while pending.len() > 10_000 || pending.front().is_some_and(|d| d.is_ready()) {
            if let Some(d) = pending.pop_front() {
                report(d)?;
            }
        }
    }
    // Every record completes (delivered or failed) within the delivery timeout.
    producer
        .flush(delivery_timeout_ms + 1_000)
        .map_err(|e| format!("flushing: {}", explain(b, &e)))?;
    while let Some(d) = pending.pop_front() {
        report(d)?;
    }
    producer
        .close(10_000)
        .map_err(|e| format!("closing the producer: {e}"))?;
    Ok(())
}

pub(crate) fn json_string(b: &Option<Bytes>) -> String {
    match b {
        None => "null".into(),
        Some(b) => {
            let s = String::from_utf8_lossy(b);
            let mut out = String::with_capacity(s.len() + 2);
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
    }
}

/// One record as `consume` prints it: `key<TAB>value` (or the value) as text, or a JSON object
/// with topic, partition, offset, timestamp, key and value.
pub(crate) fn format_record(r: &spool_protocol::client::ConsumerRecord, format: Format) -> String {
    match format {
        Format::Text => match &r.key {
            Some(k) => format!(
                "{}\t{}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(r.value.as_deref().unwrap_or_default())
            ),
            None => String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned(),
        },
        Format::Json => format!(
            "{{\"topic\":{},\"partition\":{},\"offset\":{},\"timestamp\":{},\"key\":{},\"value\":{}}}",
            json_string(&Some(Bytes::from(r.topic.clone()))),
            r.partition,
            r.offset,
            r.timestamp_ms,
            json_string(&r.key),
            json_string(&r.value)
        ),
    }
}

pub fn consume(b: &Brokers, a: ConsumeArgs) -> Result<(), String> {
    if a.group.group.is_some() {
        return group::consume_group(b, &a);
    }
    let seek =
        match a.from.as_str() {
            "earliest" => SeekTo::Earliest,
            "latest" => SeekTo::Latest,
            s if s.starts_with('@') => SeekTo::Timestamp(
                s[1..]
                    .parse()
                    .map_err(|_| format!("--from {s}: not a timestamp in ms"))?,
            ),
            s => SeekTo::Offset(s.parse().map_err(|_| {
                format!("--from {s}: want earliest, latest, OFFSET or @TIMESTAMP_MS")
            })?),
        };
    let partitions: Vec<i32> = match a.partition {
        Some(p) => vec![p],
        None => {
            let mut admin = admin(b)?;
            let d = admin
                .describe_topics(vec![a.topic.clone()])
                .map_err(|e| explain(b, &e))?;
            let (_, d) = d.into_iter().next().ok_or("no answer for the topic")?;
            let d = d.map_err(|e| explain_topic(b, &a.topic, &e))?;
            d.partitions.iter().map(|p| p.partition).collect()
        }
    };
    if a.partition.is_some() {
        errors::require_topics(b, &[a.topic.as_str()])?;
    }
    let config = ConsumerConfig {
        isolation_level: a.isolation_level.level(),
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(&bootstrap(b), config).map_err(|e| explain(b, &e))?;
    let tps: Vec<TopicPartition> = partitions
        .iter()
        .map(|&p| TopicPartition::new(a.topic.clone(), p))
        .collect();
    consumer.assign(tps.clone());
    for tp in &tps {
        consumer
            .seek(tp, seek)
            .map_err(|e| format!("seek {}/{}: {e}", tp.topic, tp.partition))?;
    }
    let mut seen = 0u64;
    let mut idle_ms = 0u64;
    let out = std::io::stdout();
    let mut out = out.lock();
    loop {
        if a.num.is_some_and(|n| seen >= n) {
            break;
        }
        let records = consumer
            .poll(500)
            .map_err(|e| format!("fetch: {}", explain_topic(b, &a.topic, &e)))?;
        if records.is_empty() {
            idle_ms += 500;
            if a.idle_timeout_ms.is_some_and(|t| idle_ms >= t) {
                break;
            }
            continue;
        }
        idle_ms = 0;
        for r in records {
            if a.num.is_some_and(|n| seen >= n) {
                break;
            }
            seen += 1;
            let line = format_record(&r, a.format);
            writeln!(out, "{line}").map_err(|e| format!("stdout: {e}"))?;
        }
        out.flush().map_err(|e| format!("stdout: {e}"))?;
    }
    Ok(())
}
