//! Command line (clap) and its validation into a [`Settings`] the runner uses: every bound is
//! checked here, at start-up, with a message naming the flag — never discovered mid-run.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use spool_protocol::client::producer::Acks;
use spool_storage::batch::Compression;

use crate::keys::KeySpec;
use crate::payload::HEADER_BYTES;

/// Largest `--message-bytes` (the broker's default `max.message.bytes` is about 1 MiB).
pub const MESSAGE_BYTES_MAX: usize = 1024 * 1024;
/// Upper bounds on the fan-out flags, so a typo cannot spawn a million tasks.
pub const PARTITIONS_MAX: i32 = 100_000;
pub const CLIENTS_MAX: usize = 10_000;
pub const CORES_MAX: usize = 256;
/// Most records per send (`--records-per-send`): a unit is one allocation of this many values.
pub const RECORDS_PER_SEND_MAX: usize = 4096;

#[derive(Debug, Parser)]
#[command(
    name = "spool-loadgen",
    version,
    about = "Load generator for spool: produce, consume or end-to-end load with latency histograms"
)]
pub struct Cli {
    #[command(subcommand)]
    pub mode: Mode,
}

#[derive(Debug, Subcommand)]
pub enum Mode {
    /// Producers only: throughput and produce-acknowledgement latency.
    Produce(Opts),
    /// Consumers only: catch-up read of what the topic holds (earliest to the end at start).
    Consume(Opts),
    /// Producers and consumers together: produce and end-to-end latency; `--verify` checks
    /// exactly-once, in-order delivery.
    E2e(Opts),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AcksArg {
    #[value(name = "0", alias = "none")]
    Zero,
    #[value(name = "1", alias = "leader")]
    One,
    #[value(name = "all", alias = "-1")]
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    None,
    Zstd,
}

#[derive(Debug, Clone, Args)]
pub struct Opts {
    /// Bootstrap brokers, comma-separated HOST:PORT (native protocol).
    #[arg(long, default_value = "127.0.0.1:9093", value_delimiter = ',')]
    pub brokers: Vec<String>,
    #[arg(long, default_value = "loadgen")]
    pub topic: String,
    /// Partitions of the topic; it is created with this many if missing.
    #[arg(long, default_value_t = 8)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i16,
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Bytes per message value (at least the 32-byte loadgen header).
    #[arg(long, default_value_t = 1024)]
    pub message_bytes: usize,
    /// none | uniform:N | zipf:N:S
    #[arg(long, default_value = "none")]
    pub keys: KeySpec,
    #[arg(long, value_enum, default_value = "all")]
    pub acks: AcksArg,
    #[arg(long, value_enum, default_value = "none")]
    pub compression: CompressionArg,
    #[arg(long, default_value_t = 64 * 1024)]
    pub batch_bytes: usize,
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    /// Producer buffer (Kafka `buffer.memory`) per producer.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    pub buffer_bytes: usize,
    /// Messages per second, all producers together (unlimited if absent). Latency is measured
    /// from each message's intended send time.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds of measured load (after the warm-up). Default 10 unless `--messages` is given.
    #[arg(long, conflicts_with = "messages")]
    pub duration: Option<f64>,
    /// Messages in total (all producers; in `consume`, all consumers).
    #[arg(long)]
    pub messages: Option<u64>,
    /// Seconds at the start whose results are not counted.
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Client executors (threads), one glommio executor each; clients are spread over them.
    #[arg(long, default_value_t = 1)]
    pub cores: usize,
    /// Pin the client executors to these CPUs (a Linux CPU list: `0-3,8`), executor `i` to the
    /// set's `i mod size`-th CPU in ascending order; default: unbound.
    #[arg(long)]
    pub cpuset: Option<crate::cpuset::CpuList>,
    /// Check that every acknowledged message arrives exactly once and in order per partition
    /// (e2e only); exits 3 on any loss, duplicate, reordering or failed send.
    #[arg(long)]
    pub verify: bool,
    /// Seconds consumers keep reading after the producers finish, to reach the log end.
    #[arg(long, default_value_t = 60.0)]
    pub drain_timeout: f64,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write HdrHistogram percentile distributions to PREFIX-produce.hgrm / PREFIX-e2e.hgrm.
    #[arg(long)]
    pub hgrm: Option<String>,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Seed for keys and filler.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Transactional producers (transactional id `loadgen-<run>-p<i>` each): every
    /// `--txn-messages` records one transaction, committed before the next begins; the report
    /// adds the commits' latency.
    #[arg(long)]
    pub transactional: bool,
    /// Records per transaction (with `--transactional`).
    #[arg(long, default_value_t = 100)]
    pub txn_messages: u64,
    /// Records a producer hands its client per call: up to this many consecutive records go as
    /// one unit (`send_records_with`: one partition, one batch, one delivery report), as
    /// Apache Iggy's bench sends its messages. 1 sends each record on its own, through Kafka's
    /// per-record `send(record, callback)`. Keyed records (`--keys`) always go one by one, so
    /// each key picks its partition; a unit never holds more than a quarter of `--batch-bytes`.
    #[arg(long, default_value_t = 64)]
    pub records_per_send: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Produce,
    Consume,
    E2e,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Produce => "produce",
            Self::Consume => "consume",
            Self::E2e => "e2e",
        }
    }
    pub fn produces(self) -> bool {
        matches!(self, Self::Produce | Self::E2e)
    }
    pub fn consumes(self) -> bool {
        matches!(self, Self::Consume | Self::E2e)
    }
}

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    Messages(u64),
    Duration(Duration),
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub kind: Kind,
    pub opts: Opts,
    pub acks: Acks,
    pub compression: Compression,
    pub bound: Bound,
    pub warmup: Duration,
    pub drain_timeout: Duration,
    /// `--cpuset`, checked against this process's allowed CPUs; `None`: unbound executors.
    pub cpus: Option<Vec<usize>>,
}

fn seconds(flag: &str, v: f64) -> Result<Duration, String> {
    if v.is_finite() && (0.0..=86_400.0).contains(&v) {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!(
            "--{flag} must be between 0 and 86400 seconds, got {v}"
        ))
    }
}

impl Settings {
    pub fn from_cli(cli: Cli) -> Result<Self, String> {
        let (kind, opts) = match cli.mode {
            Mode::Produce(o) => (Kind::Produce, o),
            Mode::Consume(o) => (Kind::Consume, o),
            Mode::E2e(o) => (Kind::E2e, o),
        };
        if opts.brokers.is_empty() || opts.brokers.iter().any(|b| b.trim().is_empty()) {
            return Err("--brokers must list at least one HOST:PORT".into());
        }
        if opts.topic.is_empty() || opts.topic.len() > 249 {
            return Err("--topic must be 1 to 249 characters".into());
        }
        if !(1..=PARTITIONS_MAX).contains(&opts.partitions) {
            return Err(format!("--partitions must be 1 to {PARTITIONS_MAX}"));
        }
        if opts.replication_factor < 1 {
            return Err("--replication-factor must be ≥ 1".into());
        }
        if kind.produces() && !(1..=CLIENTS_MAX).contains(&opts.producers) {
            return Err(format!("--producers must be 1 to {CLIENTS_MAX}"));
        }
        if kind.consumes() && !(1..=CLIENTS_MAX).contains(&opts.consumers) {
            return Err(format!("--consumers must be 1 to {CLIENTS_MAX}"));
        }
        if !(HEADER_BYTES..=MESSAGE_BYTES_MAX).contains(&opts.message_bytes) {
            return Err(format!(
                "--message-bytes must be {HEADER_BYTES} to {MESSAGE_BYTES_MAX}"
            ));
        }
        if opts.batch_bytes == 0 || opts.buffer_bytes < opts.message_bytes * 2 {
            return Err("--batch-bytes must be > 0 and --buffer-bytes ≥ 2 messages".into());
        }
        if !(1..=RECORDS_PER_SEND_MAX).contains(&opts.records_per_send) {
            return Err(format!(
                "--records-per-send must be 1 to {RECORDS_PER_SEND_MAX}"
            ));
        }
        if !(1..=CORES_MAX).contains(&opts.cores) {
            return Err(format!("--cores must be 1 to {CORES_MAX}"));
        }
        if let Some(r) = opts.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err("--rate must be a positive number of messages per second".into());
            }
        }
        if opts.verify && kind != Kind::E2e {
            return Err("--verify needs `e2e` (producers and consumers in one run)".into());
        }
        let bound = match (opts.messages, opts.duration) {
            (Some(0), _) => return Err("--messages must be > 0".into()),
            (Some(n), _) => Bound::Messages(n),
            (None, Some(d)) => Bound::Duration(seconds("duration", d)?),
            (None, None) => Bound::Duration(Duration::from_secs(10)),
        };
        let cpus = match &opts.cpuset {
            None => None,
            Some(list) => {
                let allowed =
                    crate::cpuset::allowed().map_err(|e| format!("--cpuset {list}: {e}"))?;
                Some(
                    crate::cpuset::choose(Some(list), None, &allowed)
                        .map_err(|e| format!("--cpuset {list}: {e}"))?,
                )
            }
        };
        let warmup = seconds("warmup", opts.warmup)?;
        let drain_timeout = seconds("drain-timeout", opts.drain_timeout)?;
        Ok(Self {
            kind,
            acks: match opts.acks {
                AcksArg::Zero => Acks::None,
                AcksArg::One => Acks::Leader,
                AcksArg::All => Acks::All,
            },
            compression: match opts.compression {
                CompressionArg::None => Compression::None,
                CompressionArg::Zstd => Compression::Zstd,
            },
            bound,
            warmup,
            drain_timeout,
            cpus,
            opts,
        })
    }

    pub fn brokers(&self) -> Vec<&str> {
        self.opts.brokers.iter().map(|s| s.trim()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Settings, String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        Settings::from_cli(cli)
    }

    #[test]
    fn defaults_are_valid() {
        let s = parse(&["spool-loadgen", "e2e"]).expect("defaults");
        assert_eq!(s.kind, Kind::E2e);
        assert_eq!(s.bound, Bound::Duration(Duration::from_secs(10)));
        assert_eq!(s.acks, Acks::All);
    }

    #[test]
    fn rejects_bad_values_with_the_flag_name() {
        for (args, flag) in [
            (
                &["x", "produce", "--message-bytes", "8"][..],
                "--message-bytes",
            ),
            (&["x", "produce", "--partitions", "0"][..], "--partitions"),
            (&["x", "produce", "--verify"][..], "--verify"),
            (&["x", "produce", "--rate=-1"][..], "--rate"),
            (&["x", "produce", "--cores", "0"][..], "--cores"),
            (&["x", "produce", "--warmup", "nan"][..], "--warmup"),
            (&["x", "produce", "--messages", "0"][..], "--messages"),
            (&["x", "produce", "--cpuset", "3-1"][..], "runs backwards"),
            (&["x", "produce", "--cpuset", "x"][..], "`x` is neither"),
        ] {
            let e = parse(args).expect_err("must fail");
            assert!(e.contains(flag), "{e}");
        }
        assert!(parse(&["x", "produce", "--keys", "zipf:1"]).is_err());
        assert!(parse(&["x", "produce", "--messages", "5", "--duration", "1"]).is_err());
    }

    #[test]
    fn cpuset_is_checked_against_the_allowed_cpus() {
        assert_eq!(parse(&["x", "produce"]).expect("ok").cpus, None);
        let allowed = crate::cpuset::allowed().expect("affinity");
        let first = allowed[0].to_string();
        let s = parse(&["x", "produce", "--cpuset", &first]).expect("ok");
        assert_eq!(s.cpus, Some(vec![allowed[0]]));
        // One past the last allowed CPU is never allowed.
        let outside = (allowed[allowed.len() - 1] + 1).to_string();
        let e = parse(&["x", "produce", "--cpuset", &outside]).expect_err("outside");
        assert!(e.contains("not in this process's allowed CPUs"), "{e}");
    }

    #[test]
    fn acks_and_compression_map_to_client_types() {
        let s = parse(&["x", "produce", "--acks", "1", "--compression", "zstd"]).expect("ok");
        assert_eq!(s.acks, Acks::Leader);
        assert_eq!(s.compression, Compression::Zstd);
        assert_eq!(s.bound, Bound::Duration(Duration::from_secs(10)));
    }
}
