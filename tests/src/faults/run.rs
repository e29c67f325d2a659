//! One fault run: three fresh brokers, a workload and its nemeses for the run's seconds, then
//! every harm healed, the cluster settled (every partition led, every replica in sync), the
//! topic and the group's offsets read back, and the checker run over what the workload saw.
//!
//! Promises: bounded — the workload stops at its deadline, each wait has its own bound (the
//! cluster helpers' 30 s, the producers' delivery timeout), and an interrupted campaign
//! ([`interrupted`]) stops at the next step; the brokers are this run's own processes and die
//! with it ([`crate::cluster::Cluster`] kills them by PID on drop), its iptables chains and its
//! loop mount are removed on drop too, also when a step panics (the panic becomes the run's
//! `error`). A run that failed keeps every broker's logs in its directory, and so does one
//! whose longest stretch without an acknowledgement is an outlier.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spool_protocol::client::admin::NewTopic;
use spool_protocol::client::TopicPartition;

use super::check::{check_with_origins, group_caught_up, Report};
use super::history::{FinalCommits, FinalLog, History, NemesisSpan, WriteAcks};
use super::nemesis::{self, Context, Harm, Kind, Rng};
use super::origins::read_origins;
use super::workload::{self, ProducerSpec, Shared};
use super::{ctp_workload, run_txn, txn_rdkafka, txn_workload};
use crate::cluster::Cluster;
use crate::small_disk::SmallDisk;

/// The workload's topic: RF 3, min ISR 2 (the default for RF 3).
pub const TOPIC: &str = "queue";
const PARTITIONS: i32 = 3;
/// The group offsets topic, which must be whole again too before the next harm.
const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// The consumer group.
pub const GROUP: &str = "faults";
/// Records per second, per producer.
const RATE_PER_S: u64 = 100;
/// The node whose data dir sits on the small disk, in runs with the disk-full nemesis.
const SMALL_DISK_NODE: i32 = 3;
const SMALL_DISK_MIB: u64 = 128;
/// A run without any acknowledgement for longer than this keeps its brokers' logs even when it
/// passes: three times the usual failover window (an election and the clients' refresh).
const KEEP_LOGS_UNAVAILABLE_MS: u64 = 9_000;
/// How long the cluster may take to bring every replica back in sync after the last heal.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Which workload a run drives (the fault issue's (a) and (b)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Idempotent acks=all producers (spool's client and librdkafka).
    Queue,
    /// acks=1 producers (both clients) beside one acks=all producer.
    Acks1,
    /// Transactional producers, some transactions aborted, read back with read_committed
    /// (`super::txn_workload`, `super::txn_check`).
    Txn,
    /// Consume-transform-produce: a processor's outputs exactly once (`super::ctp_workload`,
    /// `super::ctp_check`).
    Ctp,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Queue => "queue",
            Workload::Acks1 => "acks1",
            Workload::Txn => "txn",
            Workload::Ctp => "ctp",
        }
    }
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub seed: u64,
    pub seconds: u64,
    pub workload: Workload,
    pub kinds: Vec<Kind>,
    /// Brokers acknowledge from memory (`--durability replicated`, no interval flush) and the
    /// topic allows unclean elections: the negative control, which must lose acknowledged
    /// writes under [`Kind::KillAll`].
    pub negative_control: bool,
    /// Where this run's JSON and (when it fails) its brokers' logs go.
    pub dir: PathBuf,
    /// A run whose group consumers read nothing passes (`--tolerate consumer-stall`).
    pub tolerate_consumer_stall: bool,
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub seed: u64,
    pub kinds: Vec<Kind>,
    pub report: Report,
    /// The harness could not finish the run (a setup step failed, the cluster did not settle).
    pub error: Option<String>,
    pub elapsed_ms: u64,
    /// As the run's [`RunConfig`] said.
    pub tolerate_consumer_stall: bool,
}

impl RunResult {
    pub fn failed(&self) -> bool {
        self.error.is_some()
            || self.report.violations() > 0
            || (self.report.consumers_stalled.is_some() && !self.tolerate_consumer_stall)
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Set by SIGINT/SIGTERM (the binary installs the handler): runs stop at their next step.
pub fn interrupted() -> &'static AtomicBool {
    &INTERRUPTED
}

fn check_interrupted() -> Result<(), String> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Runs one fault run (module docs).
pub fn run(cfg: &RunConfig) -> RunResult {
    let started = Instant::now();
    let _ = std::fs::create_dir_all(&cfg.dir);
    let mut result = RunResult {
        seed: cfg.seed,
        kinds: cfg.kinds.clone(),
        report: Report::default(),
        error: None,
        elapsed_ms: 0,
        tolerate_consumer_stall: cfg.tolerate_consumer_stall,
    };
    // Declared before the cluster, so the brokers stop before it is unmounted.
    let small_disk = if cfg.kinds.contains(&Kind::DiskFull) {
        match SmallDisk::mount(SMALL_DISK_MIB) {
            Ok(d) => Some(d),
            Err(e) => {
                result.error = Some(format!("disk-full needs a loop mount: {e}"));
                return result;
            }
        }
    } else {
        None
    };
    let mut extra: Vec<&str> = Vec::new();
    if cfg.negative_control {
        extra.extend([
            "--durability",
            "replicated",
            "--flush-interval-ms",
            "3600000",
        ]);
    }
    let data_dirs: Vec<Option<PathBuf>> = (1..=3)
        .map(|id| {
            small_disk
                .as_ref()
                .filter(|_| id == SMALL_DISK_NODE)
                .map(|d| d.path().join("data"))
        })
        .collect();
    let started_cluster =
        std::panic::catch_unwind(|| Cluster::start_with_data_dirs(3, &extra, &data_dirs));
    let mut cluster = match started_cluster {
        Ok(c) => c,
        Err(panic) => {
            result.error = Some(format!("starting the cluster: {}", panic_text(&panic)));
            return result;
        }
    };
    let ctx = Context {
        topic: TOPIC,
        small_disk: small_disk.as_ref().map(|d| (SMALL_DISK_NODE, d)),
    };
    let driven = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        drive(cfg, &mut cluster, &ctx)
    }));
    match driven {
        Ok(Ok(report)) => result.report = report,
        Ok(Err(e)) => result.error = Some(e),
        Err(panic) => result.error = Some(panic_text(&panic)),
    }
    result.elapsed_ms = started.elapsed().as_millis() as u64;
    // A passing run whose longest ack-free stretch is an outlier keeps its logs too, so the
    // stretch can be explained (the campaigns' largest windows were not, for want of them).
    if result.failed() || result.report.max_unavailable_ms > KEEP_LOGS_UNAVAILABLE_MS {
        keep_logs(&cluster, &cfg.dir);
    }
    result
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Copies every start's log of every broker into `dir/node-<id>/`, and the workload topic's
/// partition directories (segments, indexes, epoch checkpoints) into `dir/node-<id>/data/`: a
/// duplicate or a loss is explained by the batches' headers (producer id, epoch, sequence, leader
/// epoch), which no client shows.
fn keep_logs(cluster: &Cluster, dir: &Path) {
    for (i, node) in cluster.nodes.iter().enumerate() {
        let to = dir.join(format!("node-{}", i + 1));
        let _ = std::fs::create_dir_all(&to);
        if let Ok(entries) = std::fs::read_dir(node.scratch()) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log") {
                    let _ = std::fs::copy(&p, to.join(e.file_name()));
                }
            }
        }
        let prefix = format!("{TOPIC}-");
        let Ok(partitions) = std::fs::read_dir(node.data_dir()) else {
            continue;
        };
        for part in partitions.flatten() {
            if !part.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let into = to.join("data").join(part.file_name());
            let _ = std::fs::create_dir_all(&into);
            for f in std::fs::read_dir(part.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if f.file_type().is_ok_and(|t| t.is_file()) {
                    let _ = std::fs::copy(f.path(), into.join(f.file_name()));
                }
            }
        }
    }
}

/// The run itself, on a started cluster.
fn drive(cfg: &RunConfig, cluster: &mut Cluster, ctx: &Context<'_>) -> Result<Report, String> {
    cluster.wait_healthy();
    let mut admin = crate::client::admin(cluster.node(1));
    let mut topic = NewTopic::new(TOPIC, PARTITIONS, 3);
    if cfg.negative_control {
        // Every broker comes back from kill -9 unclean (nothing it acknowledged was on disk),
        // so without unclean election the partitions would stay leaderless instead of
        // showing the loss.
        topic = topic.config("unclean.leader.election.enable", "true");
    }
    for (topic, r) in admin
        .create_topics(vec![topic])
        .map_err(|e| format!("creating {TOPIC}: {e}"))?
    {
        r.map_err(|e| format!("creating {topic}: {e}"))?;
    }
    let offsets_too = !cfg.negative_control;
    wait_settled(cluster, Duration::from_secs(30), offsets_too)?;

    let shared = Shared {
        history: Arc::new(Mutex::new(History::default())),
        started: Instant::now(),
        stop: Arc::new(AtomicBool::new(false)),
        stop_consumers: Arc::new(AtomicBool::new(false)),
        consumer_errors: Arc::default(),
    };
    // A step that panics still stops the workload threads (they end on their own then).
    let _stop_on_unwind = StopOnDrop(vec![
        Arc::clone(&shared.stop),
        Arc::clone(&shared.stop_consumers),
    ]);
    let native: Vec<String> = cluster.nodes.iter().map(|n| n.bootstrap()).collect();
    let kafka: Vec<String> = cluster.nodes.iter().map(|n| n.kafka_bootstrap()).collect();
    let spec = |id: u32, acks: WriteAcks, bootstrap: &[String]| ProducerSpec {
        id,
        topic: TOPIC.into(),
        acks,
        rate_per_s: RATE_PER_S,
        bootstrap: bootstrap.to_vec(),
    };
    let txn = cfg.workload == Workload::Txn;
    let ctp = cfg.workload == Workload::Ctp;
    if ctp {
        run_txn::setup_ctp(cluster.node(1), &native, PARTITIONS)?;
    }
    let (first_acks, second_acks) = match cfg.workload {
        Workload::Queue | Workload::Txn | Workload::Ctp => (WriteAcks::All, WriteAcks::All),
        Workload::Acks1 => (WriteAcks::Leader, WriteAcks::Leader),
    };
    let mut producers = if ctp {
        Vec::new()
    } else if txn {
        vec![
            txn_workload::spool_producer(0, &native, TOPIC, PARTITIONS, &shared),
            txn_rdkafka::producer(1, &kafka, TOPIC, PARTITIONS, &shared),
        ]
    } else {
        vec![
            workload::spool_producer(spec(0, first_acks, &native), shared.clone()),
            workload::rdkafka_producer(spec(1, second_acks, &kafka), shared.clone()),
        ]
    };
    if cfg.workload == Workload::Acks1 {
        producers.push(workload::spool_producer(
            spec(2, WriteAcks::All, &native),
            shared.clone(),
        ));
    }
    // The transactional workloads read back at the end, with read_committed: no group
    // consumers (ctp's processor stands in their place).
    let mut consumers: Vec<_> = (0..if txn || ctp { 0 } else { 2 })
        .map(|id| {
            workload::group_consumer(
                id,
                GROUP.into(),
                TOPIC.into(),
                native.clone(),
                shared.clone(),
            )
        })
        .collect();
    if ctp {
        consumers.push(ctp_workload::processor(&native, TOPIC, PARTITIONS, &shared));
    }

    let mut rng = Rng::new(cfg.seed);
    let deadline = shared.started + Duration::from_secs(cfg.seconds);
    let nemesis_result = nemeses(cfg, cluster, ctx, &mut rng, &shared, deadline);
    // Past the nemeses' window the workload keeps going until the deadline: the cluster shows
    // it recovers while loaded.
    while Instant::now() < deadline && nemesis_result.is_ok() && check_interrupted().is_ok() {
        std::thread::sleep(Duration::from_millis(50));
    }
    shared.stop.store(true, Ordering::SeqCst);
    let workload_end_ms = shared.now_ms();
    // Producers drain what they sent (bounded by their delivery timeout) with the cluster whole.
    let mut workload_errors = Vec::new();
    let mut join = |t: JoinHandle<Result<(), String>>| match t.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => workload_errors.push(e),
        Err(panic) => workload_errors.push(panic_text(&panic)),
    };
    producers.into_iter().for_each(&mut join);
    // The consumers go on until the group has read everything from the healed cluster.
    let caught_up = if nemesis_result.is_ok() {
        wait_settled(cluster, SETTLE_TIMEOUT, offsets_too).and_then(|()| {
            if ctp {
                run_txn::wait_ctp(&shared, CATCH_UP_TIMEOUT);
                Ok(Ok(()))
            } else if cfg.negative_control || txn {
                // Its brokers lose the group's offsets partitions too (every kill is unclean
                // there): what it tests is the checker's loss count, not the group. (The txn
                // workload has no group.)
                Ok(Ok(()))
            } else {
                wait_group_caught_up(cluster, &shared)
            }
        })
    } else {
        Ok(Ok(()))
    };
    shared.stop_consumers.store(true, Ordering::SeqCst);
    consumers.into_iter().for_each(&mut join);
    nemesis_result?;
    let caught_up = caught_up?;
    if let Some(e) = workload_errors.into_iter().next() {
        return Err(format!("the workload: {e}"));
    }
    check_interrupted()?;
    if txn || ctp {
        let history = shared
            .history
            .lock()
            .map_err(|_| "the history's lock was poisoned".to_string())?
            .clone();
        let (visible, whole) =
            run_txn::read_back(cluster.node(1), TOPIC, PARTITIONS, SETTLE_TIMEOUT)?;
        let check = if txn {
            run_txn::check_txn
        } else {
            run_txn::check_ctp
        };
        let (report, extra) = check(&history, &visible, &whole);
        write_json(cfg, &report, &history, &BTreeMap::new(), extra)?;
        return Ok(report);
    }

    let ends = crate::client::end_offsets(cluster.node(1), TOPIC, PARTITIONS);
    let final_log = read_back(cluster, &ends)?;
    let origins = read_origins(cluster, TOPIC, &ends)?;
    let mut history = shared
        .history
        .lock()
        .map_err(|_| "the history's lock was poisoned".to_string())?
        .clone();
    let final_commits = match fetch_commits(cluster) {
        Ok(c) => c,
        // The negative control's offsets topic lost its log on every broker too, and has no
        // unclean election: it stays leaderless, so its commits cannot be checked.
        Err(e) if cfg.negative_control => {
            println!("  negative control: commit checks skipped ({e})");
            history.commits.clear();
            FinalCommits::new()
        }
        Err(e) => return Err(e),
    };
    history.workload_end_ms = workload_end_ms;
    let mut report = check_with_origins(&history, &final_log, &final_commits, Some(&origins));
    report.consumers_stalled = caught_up.err();
    let consumer_errors = shared
        .consumer_errors
        .lock()
        .map(|e| e.clone())
        .unwrap_or_default();
    write_json(
        cfg,
        &report,
        &history,
        &consumer_errors,
        serde_json::Value::Null,
    )?;
    Ok(report)
}

/// Sets the workload's stop flags when dropped.
struct StopOnDrop(Vec<Arc<AtomicBool>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        for flag in &self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

/// The nemesis cycles until the last one that fits before `deadline` (quiet, harm, hold,
/// heal), every harm healed before returning — also when a step fails.
fn nemeses(
    cfg: &RunConfig,
    cluster: &mut Cluster,
    ctx: &Context<'_>,
    rng: &mut Rng,
    shared: &Shared,
    deadline: Instant,
) -> Result<(), String> {
    // The last heal leaves a quarter of the run (at least 3 s) for the workload to resume.
    let recovery = Duration::from_secs((cfg.seconds / 4).max(3));
    loop {
        check_interrupted()?;
        let quiet = Duration::from_millis(rng.between(1_000, 2_000));
        let hold = Duration::from_millis(rng.between(2_000, 4_000));
        if Instant::now() + quiet + hold + recovery > deadline {
            return Ok(());
        }
        std::thread::sleep(quiet);
        let start_ms = shared.now_ms();
        let mut harms: Vec<Harm> = Vec::new();
        let mut busy: Vec<i32> = Vec::new();
        let mut applied = Ok(());
        for &kind in &cfg.kinds {
            match nemesis::apply(kind, cluster, rng, ctx, &busy) {
                Ok((h, targets)) => {
                    harms.extend(h);
                    busy.extend(targets);
                }
                Err(e) => {
                    applied = Err(format!("{}: {e}", kind.name()));
                    break;
                }
            }
        }
        if applied.is_ok() {
            std::thread::sleep(hold);
        }
        let healed = nemesis::heal(cluster, harms);
        let end_ms = shared.now_ms();
        // Each cycle starts from a whole cluster: every broker back and every replica of the
        // workload's topic and of the group's offsets back in sync. So each window measures its
        // own recovery, and the harms stay within the promise (one broker or disk lost at a
        // time): a wipe while the last wiped broker is still catching up could take the only
        // full copies of a partition, which no replication factor of 3 survives.
        let settled = if healed.is_ok() && applied.is_ok() {
            wait_settled(cluster, SETTLE_TIMEOUT, !cfg.negative_control)
                .map_err(|e| format!("after a heal: {e}"))
        } else {
            Ok(())
        };
        if let Ok(mut h) = shared.history.lock() {
            for kind in &cfg.kinds {
                h.nemeses.push(NemesisSpan {
                    kind: kind.name().into(),
                    start_ms,
                    end_ms,
                });
            }
        }
        applied?;
        healed?;
        settled?;
    }
}

/// How long the group may take, once the cluster has healed, to read everything.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits (at most [`CATCH_UP_TIMEOUT`]) until the group's acknowledged commits reach every
/// partition's end offset: `Ok(Err(why))` when they do not (the consumers stalled), `Err` when
/// the run itself cannot go on.
fn wait_group_caught_up(cluster: &Cluster, shared: &Shared) -> Result<Result<(), String>, String> {
    let ends = crate::client::end_offsets(cluster.node(1), TOPIC, PARTITIONS);
    let until = Instant::now() + CATCH_UP_TIMEOUT;
    loop {
        check_interrupted()?;
        let short = {
            let h = shared
                .history
                .lock()
                .map_err(|_| "the history's lock was poisoned".to_string())?;
            group_caught_up(&h.commits, GROUP, TOPIC, &ends)
        };
        match short {
            Ok(()) => return Ok(Ok(())),
            Err(why) if Instant::now() >= until => {
                return Ok(Err(format!(
                "the group did not read everything within {CATCH_UP_TIMEOUT:?} of the heal: {why}"
            )))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Waits until every broker is registered and unfenced and every partition of the workload's
/// topic and — with `offsets_too` — of the group offsets topic (when it exists) has a leader
/// and all three replicas in sync. The negative control leaves the offsets topic out: its
/// brokers acknowledge from memory, so every kill is an unclean shutdown that takes them out
/// of the offsets partitions' ISRs for good (no unclean elections there).
fn wait_settled(cluster: &Cluster, timeout: Duration, offsets_too: bool) -> Result<(), String> {
    cluster.wait_healthy();
    let until = Instant::now() + timeout;
    let whole = |rows: &[crate::cluster::PartitionRow]| {
        rows.iter().all(|r| r.leader > 0 && r.isr.len() == 3)
    };
    loop {
        check_interrupted()?;
        let rows = cluster.describe(1, TOPIC);
        let offsets = if offsets_too {
            cluster.describe(1, OFFSETS_TOPIC)
        } else {
            Vec::new()
        };
        if rows.len() == PARTITIONS as usize && whole(&rows) && whole(&offsets) {
            return Ok(());
        }
        if Instant::now() >= until {
            let short: Vec<_> = offsets
                .iter()
                .filter(|r| r.leader <= 0 || r.isr.len() != 3)
                .collect();
            return Err(format!(
                "the cluster did not settle within {timeout:?}: {rows:?}; {OFFSETS_TOPIC} partitions short: {short:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every partition from its start to its high watermark (`ends`), through node 1.
fn read_back(cluster: &Cluster, ends: &[i64]) -> Result<FinalLog, String> {
    let broker = cluster.node(1);
    let mut consumer = crate::client::consumer_from_earliest(broker, TOPIC, PARTITIONS);
    let mut log: FinalLog = (0..PARTITIONS)
        .map(|p| ((TOPIC.to_string(), p), Vec::new()))
        .collect();
    let mut next: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let until = Instant::now() + SETTLE_TIMEOUT;
    while next.iter().any(|(p, n)| *n < ends[*p as usize]) {
        if Instant::now() >= until {
            return Err(format!("reading back: stopped at {next:?} of {ends:?}"));
        }
        for r in consumer
            .poll(500)
            .map_err(|e| format!("reading back: {e}"))?
        {
            let value = r
                .value
                .as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            next.insert(r.partition, r.offset + 1);
            if let Some(records) = log.get_mut(&(r.topic.clone(), r.partition)) {
                records.push((r.offset, value));
            }
        }
    }
    Ok(log)
}

/// The group's committed offsets, as the coordinator answers them now.
fn fetch_commits(cluster: &Cluster) -> Result<FinalCommits, String> {
    let tps: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(TOPIC, p))
        .collect();
    let offsets = crate::client::admin(cluster.node(1))
        .fetch_offsets(GROUP, Some(tps))
        .map_err(|e| format!("fetching {GROUP}'s offsets: {e}"))?;
    Ok(offsets
        .into_iter()
        .filter(|(_, o)| *o >= 0)
        .map(|(tp, o)| ((GROUP.to_string(), (tp.topic, tp.partition)), o))
        .collect())
}

/// `dir/run.json`: the run's settings, the checker's report, the history's counts, the errors
/// the clients met, and a transactional workload's own counts (`workload_counts`).
fn write_json(
    cfg: &RunConfig,
    report: &Report,
    history: &History,
    consumer_errors: &BTreeMap<String, u64>,
    workload_counts: serde_json::Value,
) -> Result<(), String> {
    let list = |v: &[String]| serde_json::json!(v.iter().take(50).collect::<Vec<_>>());
    let json = serde_json::json!({
        "seed": cfg.seed,
        "workload_counts": workload_counts,
        "seconds": cfg.seconds,
        "workload": cfg.workload.name(),
        "nemeses": cfg.kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
        "negative_control": cfg.negative_control,
        "writes": history.writes.len(),
        "acked_all": report.acked_all,
        "acked_acks1": report.acked_leader,
        "not_acked": report.not_acked,
        "read_back": report.read_back,
        "consumer_reads": report.consumer_reads,
        "commits": history.commits.len(),
        "not_acked_errors": not_acked_errors(history),
        "consumer_errors": consumer_errors,
        "lost": report.lost.len(),
        "lost_acks1": report.lost_acks1,
        "duplicated": report.duplicated.len(),
        "duplicated_acks1": report.duplicated_acks1,
        "reordered_acks1": report.reordered_acks1,
        "reordered": report.reordered.len(),
        "duplicated_across_epochs": report.duplicated_across_epochs.len(),
        "reordered_across_epochs": report.reordered_across_epochs.len(),
        "across_epochs": {
            "duplicated": list(&report.duplicated_across_epochs),
            "reordered": list(&report.reordered_across_epochs),
        },
        "inconsistent": report.inconsistent.len(),
        "vanished_reads": report.vanished_reads.len(),
        "commits_backwards": report.commits_backwards.len(),
        "stalled": report.stalled.len(),
        "consumers_stalled": report.consumers_stalled,
        "max_unavailable_ms": report.max_unavailable_ms,
        "unavailable_ms_by_nemesis": report.unavailable_ms_by_nemesis,
        "nemesis_windows": history.nemeses.iter().map(|s| serde_json::json!([s.kind, s.start_ms, s.end_ms])).collect::<Vec<_>>(),
        "violations": {
            "lost": list(&report.lost),
            "duplicated": list(&report.duplicated),
            "reordered": list(&report.reordered),
            "inconsistent": list(&report.inconsistent),
            "vanished_reads": list(&report.vanished_reads),
            "commits_backwards": list(&report.commits_backwards),
            "stalled": list(&report.stalled),
        },
    });
    let path = cfg.dir.join("run.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
    .map_err(|e| format!("{}: {e}", path.display()))
}

/// How often each error ended a write without an acknowledgement.
fn not_acked_errors(history: &History) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for w in &history.writes {
        if let super::history::Outcome::NotAcked { error } = &w.outcome {
            *counts.entry(error.clone()).or_default() += 1;
        }
    }
    counts
}
