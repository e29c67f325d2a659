//! Broker configuration: flags (clap) with `SPOOL_*` environment overrides, validated once at
//! start-up with messages that name the setting. Zero configuration works: `./spool-data`, every
//! core, 127.0.0.1, ports 9092 (Kafka wire protocol), 9093 (native) and 9644 (admin HTTP).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use spool_core::topic_config::{self, TopicDefaults};

use crate::cluster_config::{parse_voters, Voter};
use spool_storage::Durability;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// Acknowledge after fdatasync (group commit).
    Fsync,
    /// Acknowledge after the in-sync replicas have the bytes in memory; flush on an interval.
    Replicated,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Where partition logs and the raft metadata log live.
    #[arg(long, env = "SPOOL_DATA_DIR", default_value = "./spool-data")]
    pub data_dir: PathBuf,
    /// Executors (one pinned per CPU); default: one per CPU of `--cpuset` (with it, the first N
    /// of the set).
    #[arg(long, env = "SPOOL_CORES")]
    pub cores: Option<usize>,
    /// CPUs to pin the executors to, one per listed CPU in ascending order (a Linux CPU list:
    /// `0-3,8,10-11`); default: every CPU this process may run on (its affinity mask).
    #[arg(long, env = "SPOOL_CPUSET")]
    pub cpuset: Option<crate::cpuset::CpuList>,
    /// Address every listener binds.
    #[arg(long, env = "SPOOL_HOST", default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, env = "SPOOL_NATIVE_PORT", default_value_t = 9093)]
    pub native_port: u16,
    #[arg(long, env = "SPOOL_ADMIN_PORT", default_value_t = 9644)]
    pub admin_port: u16,
    #[arg(long, env = "SPOOL_NODE_ID", default_value_t = 0)]
    pub node_id: i32,
    #[arg(long, env = "SPOOL_DURABILITY", value_enum, default_value_t = DurabilityArg::Fsync)]
    pub durability: DurabilityArg,
    /// How far past each active segment's end its blocks are written with zeros ahead of the
    /// appends, so the fdatasyncs that acknowledge them flush no extent metadata (a multiple of
    /// 4096; 0: off). Default: 8 MiB under `--durability fsync`, off under `replicated`.
    #[arg(long, env = "SPOOL_LOG_PREWRITE_BYTES")]
    pub log_prewrite_bytes: Option<u64>,
    /// Memory per core registered with io_uring for O_DIRECT buffers (log staging, cold fetch
    /// reads): reads and writes into it skip pinning their pages on every request. Resident from
    /// start-up; buffers that do not fit come from the heap and work as before. A multiple of
    /// 4096, at least 1 MiB. Default: 128 MiB, or a thirty-second of the machine's memory
    /// split across the cores where that is less.
    #[arg(long, env = "SPOOL_IO_MEMORY_BYTES")]
    pub io_memory_bytes: Option<u64>,
    /// Serve fetches by copying segment bytes instead of splicing file ranges.
    #[arg(long, env = "SPOOL_FETCH_COPY", default_value_t = false)]
    pub fetch_copy: bool,
    /// Largest record batch accepted (Kafka's `message.max.bytes`).
    #[arg(long, env = "SPOOL_MAX_MESSAGE_BYTES", default_value_t = topic_config::MAX_MESSAGE_BYTES_DEFAULT)]
    pub max_message_bytes: usize,
    /// Largest frame read from a client, checked before allocating.
    #[arg(long, env = "SPOOL_MAX_FRAME_BYTES", default_value_t = 100 * 1024 * 1024)]
    pub max_frame_bytes: usize,
    /// Requests one connection may have in flight; more wait in the socket (backpressure).
    #[arg(long, env = "SPOOL_MAX_IN_FLIGHT", default_value_t = 16)]
    pub max_in_flight_per_connection: usize,
    /// How often acks=0 appends are made durable and visible.
    #[arg(long, env = "SPOOL_FLUSH_INTERVAL_MS", default_value_t = 50)]
    pub flush_interval_ms: u64,
    /// How often retention and compaction run over each core's partitions (Kafka's
    /// `log.retention.check.interval.ms`).
    #[arg(
        long,
        env = "SPOOL_LOG_RETENTION_CHECK_INTERVAL_MS",
        default_value_t = 300_000
    )]
    pub log_retention_check_interval_ms: u64,
    /// Default `segment.bytes` for new topics.
    #[arg(long, env = "SPOOL_SEGMENT_BYTES", default_value_t = topic_config::SEGMENT_BYTES_DEFAULT)]
    pub segment_bytes: u64,
    /// Default `retention.ms` for new topics (-1: forever).
    #[arg(long, env = "SPOOL_RETENTION_MS", default_value_t = topic_config::RETENTION_MS_DEFAULT, allow_negative_numbers = true)]
    pub retention_ms: i64,
    /// Kafka's `min.insync.replicas` for topics that do not set it: acks=all needs this many
    /// in-sync replicas (capped by the replication factor).
    #[arg(long, env = "SPOOL_MIN_INSYNC_REPLICAS", default_value_t = spool_core::topic_config::MIN_INSYNC_REPLICAS_DEFAULT)]
    pub min_insync_replicas: u32,
    /// Kafka's `replica.lag.time.max.ms` for topics that do not set it: a follower that has not
    /// caught up with its leader for this long leaves the in-sync replicas.
    #[arg(long, env = "SPOOL_REPLICA_LAG_TIME_MAX_MS", default_value_t = spool_core::topic_config::REPLICA_LAG_TIME_MAX_MS_DEFAULT)]
    pub replica_lag_time_max_ms: u64,
    /// Kafka wire protocol port (on `--host`).
    #[arg(long, env = "SPOOL_KAFKA_PORT", default_value_t = 9092)]
    pub kafka_port: u16,
    /// Host Kafka clients are told to connect to (Metadata, FindCoordinator); default `--host`.
    #[arg(long, env = "SPOOL_ADVERTISED_HOST")]
    pub advertised_host: Option<String>,
    /// Kafka port clients are told to connect to; default `--kafka-port`.
    #[arg(long, env = "SPOOL_ADVERTISED_KAFKA_PORT")]
    pub advertised_kafka_port: Option<u16>,
    /// Kafka's `auto.create.topics.enable`: Metadata for an unknown topic creates it.
    #[arg(long, env = "SPOOL_AUTO_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic (Kafka's `num.partitions`).
    #[arg(long, env = "SPOOL_DEFAULT_PARTITIONS", default_value_t = 1)]
    pub default_partitions: i32,
    /// How long a new (empty) consumer group waits for more members before its first rebalance
    /// (Kafka's `group.initial.rebalance.delay.ms`).
    #[arg(
        long,
        env = "SPOOL_GROUP_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3_000
    )]
    pub group_initial_rebalance_delay_ms: u64,
    /// Smallest `session.timeout.ms` a group member may ask for.
    #[arg(
        long,
        env = "SPOOL_GROUP_MIN_SESSION_TIMEOUT_MS",
        default_value_t = 6_000
    )]
    pub group_min_session_timeout_ms: u64,
    /// Largest `session.timeout.ms` a group member may ask for.
    #[arg(
        long,
        env = "SPOOL_GROUP_MAX_SESSION_TIMEOUT_MS",
        default_value_t = 1_800_000
    )]
    pub group_max_session_timeout_ms: u64,
    /// Partitions of `__consumer_offsets` when it is created (Kafka's
    /// `offsets.topic.num.partitions`).
    #[arg(long, env = "SPOOL_OFFSETS_TOPIC_PARTITIONS", default_value_t = 50)]
    pub offsets_topic_partitions: i32,
    /// Partitions of `__transaction_state` when it is created (Kafka's
    /// `transaction.state.log.num.partitions`).
    #[arg(long, env = "SPOOL_TRANSACTION_STATE_PARTITIONS", default_value_t = 50)]
    pub transaction_state_partitions: i32,
    /// Longest `transaction.timeout.ms` a transactional producer may ask for (Kafka's
    /// `transaction.max.timeout.ms`).
    #[arg(
        long,
        env = "SPOOL_TRANSACTION_MAX_TIMEOUT_MS",
        default_value_t = 900_000
    )]
    pub transaction_max_timeout_ms: u32,
    /// The controller quorum, Kafka's `controller.quorum.voters` form:
    /// `1@127.0.0.1:9094,2@127.0.0.2:9094,3@127.0.0.3:9094`. Unset: this broker is the single
    /// voter of its own quorum (one node).
    #[arg(long, env = "SPOOL_CONTROLLER_VOTERS")]
    pub controller_voters: Option<String>,
    /// Port for other brokers (raft, controller calls) on `--host`.
    #[arg(long, env = "SPOOL_INTERNAL_PORT", default_value_t = 9094)]
    pub internal_port: u16,
    /// This broker's rack (Kafka's `broker.rack`): replicas of a partition go to distinct racks.
    #[arg(long, env = "SPOOL_RACK")]
    pub rack: Option<String>,
    /// How often this broker heartbeats to the active controller.
    #[arg(long, env = "SPOOL_BROKER_HEARTBEAT_INTERVAL_MS", default_value_t = crate::cluster_config::BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT)]
    pub broker_heartbeat_interval_ms: u64,
    /// A broker without a heartbeat this long is fenced by the controller.
    #[arg(long, env = "SPOOL_BROKER_SESSION_TIMEOUT_MS", default_value_t = crate::cluster_config::BROKER_SESSION_TIMEOUT_MS_DEFAULT)]
    pub broker_session_timeout_ms: u64,
    /// On SIGTERM a clustered broker first asks the controller to move its leaderships to other
    /// in-sync replicas (a controlled shutdown) and keeps serving until it leads nothing another
    /// replica could lead — at most this long; then it stops anyway. 0: stop at once, without
    /// asking.
    #[arg(long, env = "SPOOL_CONTROLLED_SHUTDOWN_TIMEOUT_MS", default_value_t = crate::cluster_config::CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT)]
    pub controlled_shutdown_timeout_ms: u64,
    /// Snapshot the metadata image and compact the raft log after this many applied records
    /// (a broker that lags past the compacted log is sent the snapshot).
    #[arg(long, env = "SPOOL_METADATA_SNAPSHOT_ENTRIES", default_value_t = crate::cluster_config::METADATA_SNAPSHOT_ENTRIES_DEFAULT)]
    pub metadata_snapshot_entries: u64,
    /// Once a frame's first byte has arrived, the rest of it must arrive within this long, or
    /// the connection is closed (native and Kafka ports).
    #[arg(long, env = "SPOOL_REQUEST_READ_TIMEOUT_MS", default_value_t = crate::conn_deadlines::REQUEST_READ_TIMEOUT_MS_DEFAULT)]
    pub request_read_timeout_ms: u64,
    /// Kafka's `connections.max.idle.ms`: a client connection with nothing read, nothing
    /// written and no request in flight for this long is closed (native and Kafka ports).
    #[arg(long, env = "SPOOL_CONNECTIONS_MAX_IDLE_MS", default_value_t = crate::conn_deadlines::CONNECTIONS_MAX_IDLE_MS_DEFAULT)]
    pub connections_max_idle_ms: u64,
    /// Client connections (native and Kafka ports together) open at once across the broker;
    /// more are closed as soon as they are accepted. Default: half the open-files limit (after
    /// it is raised to the hard limit at start-up).
    #[arg(long, env = "SPOOL_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Kafka's `max.connections.per.ip`: client connections from one address open at once
    /// across the broker. Default: no bound of its own (Kafka's default), only
    /// `--max-connections`.
    #[arg(long, env = "SPOOL_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<usize>,
    /// Memory for client request frames, across the broker (split evenly across cores): a
    /// frame that does not fit waits, without being read, until memory is given back; one
    /// larger than a core's share is refused. Default: a quarter of the machine's memory.
    #[arg(long, env = "SPOOL_REQUEST_MEMORY_BYTES")]
    pub request_memory_bytes: Option<u64>,
    /// Memory for the response bytes the broker reads or copies for clients (cold fetch pieces,
    /// `--fetch-copy` copies), across the broker (split evenly across cores): a piece that does
    /// not fit waits; a copy that does not fit is not made this time. A separate pool from
    /// requests, so slow readers never stop the broker reading requests. Default: an eighth of
    /// the machine's memory.
    #[arg(long, env = "SPOOL_RESPONSE_MEMORY_BYTES")]
    pub response_memory_bytes: Option<u64>,
    /// Kafka's `fetch.max.bytes`: the most a fetch answers, whatever the request's `max_bytes`
    /// (one whole batch still goes out when it alone is larger, so a consumer always moves on).
    #[arg(long, env = "SPOOL_FETCH_MAX_BYTES", default_value_t = FETCH_MAX_BYTES_DEFAULT)]
    pub fetch_max_bytes: i32,
}

/// Default `--fetch-max-bytes`: Kafka's `fetch.max.bytes` (55 MiB).
pub const FETCH_MAX_BYTES_DEFAULT: i32 = 55 << 20;

/// Default `--log-prewrite-bytes` under `--durability fsync`: eight 1 MiB staging writes ahead.
pub const LOG_PREWRITE_BYTES_FSYNC: u64 = 8 << 20;

/// Default `--io-memory-bytes` (per core) where the machine has room: the staging buffers of a
/// few dozen busy partitions and the core's cold fetch reads in flight
/// (`net_io::COLD_READS_IN_FLIGHT_MAX` pieces of up to 1 MiB, each taking a 2 MiB block of
/// glommio's buddy allocator).
pub const IO_MEMORY_BYTES_DEFAULT_MAX: u64 = 128 << 20;

/// Default `--io-memory-bytes` for `cores` executors: [`IO_MEMORY_BYTES_DEFAULT_MAX`], or a
/// thirty-second of the machine's memory split across them where that is less (it is resident
/// from start-up), rounded down to 4 KiB and never below 1 MiB.
pub fn io_memory_bytes_default(cores: usize, machine_bytes: Option<u64>) -> u64 {
    let share = machine_bytes.map_or(u64::MAX, |m| m / 32 / cores.max(1) as u64);
    (share.min(IO_MEMORY_BYTES_DEFAULT_MAX) / 4096 * 4096).max(1 << 20)
}

/// The validated configuration every core shares (read-only).
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    pub cores: usize,
    /// The CPU executor `i` is pinned to is `cpus[i]`; `cpus.len() == cores`.
    pub cpus: Vec<usize>,
    pub host: String,
    pub native_port: u16,
    pub admin_port: u16,
    pub node_id: i32,
    pub durability: Durability,
    /// Zeros written ahead of each active segment's end (`spool_storage::prewrite`).
    pub log_prewrite_bytes: u64,
    /// Memory per core registered with io_uring for O_DIRECT buffers (glommio's `io_memory`).
    pub io_memory_bytes: u64,
    pub fetch_copy: bool,
    pub max_message_bytes: usize,
    pub max_frame_bytes: usize,
    pub max_in_flight_per_connection: usize,
    pub flush_interval_ms: u64,
    pub log_retention_check_interval_ms: u64,
    pub segment_bytes: u64,
    pub retention_ms: Option<i64>,
    pub kafka_port: u16,
    pub advertised_host: String,
    pub advertised_kafka_port: u16,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_min_session_timeout_ms: u64,
    pub group_max_session_timeout_ms: u64,
    pub offsets_topic_partitions: i32,
    pub transaction_state_partitions: i32,
    pub transaction_max_timeout_ms: u32,
    /// What a topic that sets nothing gets (from the flags above, Kafka's defaults elsewhere).
    pub topic_defaults: TopicDefaults,
    /// The controller quorum; empty: this broker alone (a single voter, not on the network).
    pub controller_voters: Vec<Voter>,
    pub internal_port: u16,
    pub rack: Option<String>,
    pub broker_heartbeat_interval_ms: u64,
    pub broker_session_timeout_ms: u64,
    /// The longest a stopping clustered broker waits for its controlled shutdown; 0: none.
    pub controlled_shutdown_timeout_ms: u64,
    pub metadata_snapshot_entries: u64,
    pub request_read_timeout_ms: u64,
    pub connections_max_idle_ms: u64,
    /// `None`: derived from the open-files limit by `runtime::serve` ([`crate::conn_limits`]).
    pub max_connections: Option<usize>,
    /// `None`: no per-address bound beyond `max_connections`.
    pub max_connections_per_ip: Option<usize>,
    /// Total across cores ([`crate::request_memory`]); each core gets `/ cores`.
    pub request_memory_bytes: u64,
    /// Total across cores ([`crate::response_memory`]); each core gets `/ cores`.
    pub response_memory_bytes: u64,
    pub fetch_max_bytes: i32,
    /// This process's incarnation id (KIP-631), drawn once at start-up by `runtime::serve`
    /// (zero until then): how the controller tells a restart from a broker that never went
    /// away, and how every core tells its own registration in the image from a previous one.
    pub incarnation: spool_raft::Uuid128,
}

impl BrokerConfig {
    /// Whether this broker is part of a multi-node quorum (raft and controller calls on the
    /// internal port) rather than a quorum of one.
    pub fn clustered(&self) -> bool {
        !self.controller_voters.is_empty()
    }

    /// Whether this broker votes in the controller quorum (a single node always does); one that
    /// does not follows the metadata log as a learner.
    pub fn is_voter(&self) -> bool {
        !self.clustered()
            || self
                .controller_voters
                .iter()
                .any(|v| v.node_id == self.node_id)
    }
}

impl BrokerConfig {
    pub fn from_args(a: &ServeArgs) -> Result<Self, String> {
        let allowed = crate::cpuset::allowed().map_err(|e| format!("--cpuset: {e}"))?;
        let cpus = crate::cpuset::choose(a.cpuset.as_ref(), a.cores, &allowed).map_err(|e| {
            match (&a.cpuset, e) {
                (None, crate::cpuset::CpuSetError::WrongCount { cores, cpus }) => format!(
                    "--cores must be between 1 and {cpus} (the CPUs this process may run on), got {cores}"
                ),
                (Some(list), e) => format!("--cpuset {list}: {e}"),
                (None, e) => format!("--cpuset: {e}"),
            }
        })?;
        let cores = cpus.len();
        if a.min_insync_replicas == 0 {
            return Err("--min-insync-replicas must be at least 1".into());
        }
        if a.replica_lag_time_max_ms == 0 {
            return Err("--replica-lag-time-max-ms must be at least 1".into());
        }
        if a.max_in_flight_per_connection == 0 {
            return Err("--max-in-flight must be at least 1".into());
        }
        if a.max_message_bytes < 61 || a.max_message_bytes + 4096 > a.max_frame_bytes {
            return Err(format!(
                "--max-message-bytes ({}) must be at least 61 and leave room in --max-frame-bytes ({})",
                a.max_message_bytes, a.max_frame_bytes
            ));
        }
        if a.node_id < 0 {
            return Err(format!("--node-id must be non-negative, got {}", a.node_id));
        }
        if a.segment_bytes < 4096 || a.segment_bytes > u64::from(u32::MAX) {
            return Err(format!(
                "--segment-bytes must be in [4096, {}], got {}",
                u32::MAX,
                a.segment_bytes
            ));
        }
        if a.default_partitions < 1 {
            return Err(format!(
                "--default-partitions must be at least 1, got {}",
                a.default_partitions
            ));
        }
        if a.group_min_session_timeout_ms > a.group_max_session_timeout_ms {
            return Err(format!(
                "--group-min-session-timeout-ms ({}) must not exceed --group-max-session-timeout-ms ({})",
                a.group_min_session_timeout_ms, a.group_max_session_timeout_ms
            ));
        }
        if !(1..=10_000).contains(&a.transaction_state_partitions) {
            return Err(format!(
                "--transaction-state-partitions must be in [1, 10000], got {}",
                a.transaction_state_partitions
            ));
        }
        if a.transaction_max_timeout_ms == 0 || a.transaction_max_timeout_ms > i32::MAX as u32 {
            return Err(format!(
                "--transaction-max-timeout-ms must be in [1, {}], got {}",
                i32::MAX,
                a.transaction_max_timeout_ms
            ));
        }
        if !(1..=10_000).contains(&a.offsets_topic_partitions) {
            return Err(format!(
                "--offsets-topic-partitions must be in [1, 10000], got {}",
                a.offsets_topic_partitions
            ));
        }
        let controller_voters = match &a.controller_voters {
            None => Vec::new(),
            Some(s) => parse_voters(s)?,
        };
        // A node not among the voters follows the metadata log as a learner. A voter must
        // listen where the voters list says it does: a second process started with a voter's id
        // elsewhere would otherwise vote under that id.
        if let Some(me) = controller_voters.iter().find(|v| v.node_id == a.node_id) {
            if me.host != a.host || me.port != a.internal_port {
                return Err(format!(
                    "--controller-voters says node {} listens on {}:{}, but this broker is --host {} --internal-port {}; is node id {} already taken by another broker?",
                    a.node_id, me.host, me.port, a.host, a.internal_port, a.node_id
                ));
            }
        }
        if a.metadata_snapshot_entries == 0 {
            return Err("--metadata-snapshot-entries must be at least 1".into());
        }
        if a.broker_heartbeat_interval_ms == 0
            || a.broker_heartbeat_interval_ms * 2 > a.broker_session_timeout_ms
        {
            return Err(format!(
                "--broker-heartbeat-interval-ms ({}) must be at least 1 and at most half of --broker-session-timeout-ms ({})",
                a.broker_heartbeat_interval_ms, a.broker_session_timeout_ms
            ));
        }
        if a.request_read_timeout_ms == 0 {
            return Err("--request-read-timeout-ms must be at least 1".into());
        }
        if a.connections_max_idle_ms == 0 {
            return Err("--connections-max-idle-ms must be at least 1".into());
        }
        if a.max_connections == Some(0) {
            return Err("--max-connections must be at least 1".into());
        }
        if !matches!(
            a.max_connections_per_ip,
            None | Some(1..=crate::conn_limits::PER_IP_LIMIT_MAX)
        ) {
            return Err(format!(
                "--max-connections-per-ip must be in [1, {}]",
                crate::conn_limits::PER_IP_LIMIT_MAX
            ));
        }
        let request_memory_bytes = a
            .request_memory_bytes
            .unwrap_or_else(crate::request_memory::default_total_bytes);
        let request_memory_min_bytes = cores as u64 * (1 << 20);
        if request_memory_bytes < request_memory_min_bytes {
            return Err(format!(
                "--request-memory-bytes ({request_memory_bytes}) must be at least 1 MiB per core ({request_memory_min_bytes} for {cores} cores)"
            ));
        }
        let response_memory_bytes = a
            .response_memory_bytes
            .unwrap_or_else(crate::response_memory::default_total_bytes);
        // One piece of a cold fetch range per core at least.
        let response_memory_min_bytes = cores as u64 * crate::net_io::PIECE_BYTES_MAX as u64;
        if response_memory_bytes < response_memory_min_bytes {
            return Err(format!(
                "--response-memory-bytes ({response_memory_bytes}) must be at least 1 MiB per core ({response_memory_min_bytes} for {cores} cores)"
            ));
        }
        if a.fetch_max_bytes < 1 {
            return Err("--fetch-max-bytes must be at least 1".into());
        }
        let log_prewrite_bytes = a.log_prewrite_bytes.unwrap_or(match a.durability {
            DurabilityArg::Fsync => LOG_PREWRITE_BYTES_FSYNC,
            DurabilityArg::Replicated => 0,
        });
        if log_prewrite_bytes % 4096 != 0 {
            return Err(format!(
                "--log-prewrite-bytes must be a multiple of 4096, got {log_prewrite_bytes}"
            ));
        }
        let io_memory_bytes = a.io_memory_bytes.unwrap_or_else(|| {
            io_memory_bytes_default(cores, crate::request_memory::machine_memory_bytes())
        });
        if io_memory_bytes % 4096 != 0 || io_memory_bytes < 1 << 20 {
            return Err(format!(
                "--io-memory-bytes must be a multiple of 4096 and at least 1 MiB, got {io_memory_bytes}"
            ));
        }
        if let Some(rack) = &a.rack {
            if rack.is_empty() || rack.len() > 255 {
                return Err("--rack must be 1 to 255 characters".into());
            }
        }
        Ok(Self {
            data_dir: a.data_dir.clone(),
            cores,
            cpus,
            host: a.host.clone(),
            native_port: a.native_port,
            admin_port: a.admin_port,
            node_id: a.node_id,
            durability: match a.durability {
                DurabilityArg::Fsync => Durability::Fsync,
                DurabilityArg::Replicated => Durability::Replicated,
            },
            log_prewrite_bytes,
            io_memory_bytes,
            fetch_copy: a.fetch_copy,
            max_message_bytes: a.max_message_bytes,
            max_frame_bytes: a.max_frame_bytes,
            max_in_flight_per_connection: a.max_in_flight_per_connection,
            flush_interval_ms: a.flush_interval_ms.max(1),
            log_retention_check_interval_ms: a.log_retention_check_interval_ms.max(1),
            segment_bytes: a.segment_bytes,
            retention_ms: (a.retention_ms >= 0).then_some(a.retention_ms),
            kafka_port: a.kafka_port,
            advertised_host: a.advertised_host.clone().unwrap_or_else(|| a.host.clone()),
            advertised_kafka_port: a.advertised_kafka_port.unwrap_or(a.kafka_port),
            auto_create_topics: a.auto_create_topics,
            default_partitions: a.default_partitions,
            group_initial_rebalance_delay_ms: a.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms: a.group_min_session_timeout_ms,
            group_max_session_timeout_ms: a.group_max_session_timeout_ms,
            offsets_topic_partitions: a.offsets_topic_partitions,
            transaction_state_partitions: a.transaction_state_partitions,
            transaction_max_timeout_ms: a.transaction_max_timeout_ms,
            topic_defaults: TopicDefaults {
                segment_bytes: a.segment_bytes,
                retention_ms: (a.retention_ms >= 0).then_some(a.retention_ms),
                max_message_bytes: a.max_message_bytes,
                min_insync_replicas: a.min_insync_replicas,
                replica_lag_time_max_ms: a.replica_lag_time_max_ms,
                ..TopicDefaults::default()
            },
            controller_voters,
            internal_port: a.internal_port,
            rack: a.rack.clone(),
            broker_heartbeat_interval_ms: a.broker_heartbeat_interval_ms,
            broker_session_timeout_ms: a.broker_session_timeout_ms,
            controlled_shutdown_timeout_ms: a.controlled_shutdown_timeout_ms,
            metadata_snapshot_entries: a.metadata_snapshot_entries,
            request_read_timeout_ms: a.request_read_timeout_ms,
            connections_max_idle_ms: a.connections_max_idle_ms,
            max_connections: a.max_connections,
            max_connections_per_ip: a.max_connections_per_ip,
            request_memory_bytes,
            response_memory_bytes,
            fetch_max_bytes: a.fetch_max_bytes,
            incarnation: spool_raft::Uuid128::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn config(args: &[&str]) -> Result<BrokerConfig, String> {
        let mut argv = vec!["spool"];
        argv.extend_from_slice(args);
        let w = <Wrapper as clap::Parser>::try_parse_from(argv).map_err(|e| e.to_string())?;
        BrokerConfig::from_args(&w.serve)
    }

    #[test]
    fn executors_default_to_the_affinity_mask_and_cpuset_narrows_it() {
        let allowed = crate::cpuset::allowed().expect("affinity");
        let c = config(&[]).expect("defaults");
        assert_eq!((c.cores, &c.cpus), (allowed.len(), &allowed));
        let c = config(&["--cores", "1"]).expect("one core");
        assert_eq!(c.cpus, vec![allowed[0]]);
        let last = allowed[allowed.len() - 1].to_string();
        let c = config(&["--cpuset", &last]).expect("last allowed CPU");
        assert_eq!((c.cores, c.cpus), (1, vec![allowed[allowed.len() - 1]]));
    }

    #[test]
    fn io_memory_defaults_per_core_and_is_checked_at_start_up() {
        let c = config(&[]).expect("defaults");
        let machine = crate::request_memory::machine_memory_bytes();
        assert_eq!(c.io_memory_bytes, io_memory_bytes_default(c.cores, machine));
        assert_eq!(
            io_memory_bytes_default(2, Some(24 << 30)),
            128 << 20,
            "room: the cap"
        );
        assert_eq!(
            io_memory_bytes_default(16, Some(8 << 30)),
            16 << 20,
            "a 32nd per core"
        );
        assert_eq!(
            io_memory_bytes_default(64, Some(1 << 30)),
            1 << 20,
            "never below 1 MiB"
        );
        assert_eq!(io_memory_bytes_default(3, Some(10_000_000_000)) % 4096, 0);
        assert_eq!(io_memory_bytes_default(4, None), 128 << 20);
        let c = config(&["--io-memory-bytes", "16777216"]).expect("16 MiB");
        assert_eq!(c.io_memory_bytes, 16 << 20);
        for bad in ["1000", "4096", "16777217"] {
            let e = config(&["--io-memory-bytes", bad]).map(|_| ()).unwrap_err();
            assert!(e.contains("--io-memory-bytes must be"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_broker_started_under_taskset_keeps_to_its_mask() {
        let allowed = crate::cpuset::allowed().expect("affinity");
        let last = allowed[allowed.len() - 1];
        // As `taskset -c LAST spool serve`: a thread restricted to the last CPU reads its mask.
        let cpus = std::thread::spawn(move || {
            crate::cpuset::restrict_current_thread(&[last]).expect("restrict");
            let c = config(&[]).expect("defaults");
            let e = config(&["--cores", "2"]).map(|_| ()).unwrap_err();
            (c.cpus, e)
        })
        .join()
        .expect("thread");
        assert_eq!(cpus.0, vec![last]);
        assert!(cpus.1.contains("between 1 and 1"), "{}", cpus.1);
    }

    #[test]
    fn bad_cpuset_or_cores_is_refused_naming_the_flag() {
        let allowed = crate::cpuset::allowed().expect("affinity");
        let first = allowed[0].to_string();
        let outside = (allowed[allowed.len() - 1] + 1).to_string();
        for (args, wanted) in [
            (
                vec!["--cpuset", "3-1"],
                "'3-1' for '--cpuset <CPUSET>': range 3-1 runs backwards",
            ),
            (vec!["--cpuset", "x"], "--cpuset <CPUSET>': `x` is neither"),
            (
                vec!["--cpuset", &outside],
                "not in this process's allowed CPUs",
            ),
            (
                vec!["--cpuset", &first, "--cores", "2"],
                "--cores 2 must be",
            ),
            (vec!["--cores", "0"], "--cores must be between 1 and"),
        ] {
            let e = config(&args).expect_err("must fail");
            assert!(e.contains(wanted), "{args:?}: {e}");
        }
        let too_many = (allowed.len() + 1).to_string();
        let e = config(&["--cores", &too_many]).expect_err("more than allowed");
        assert!(e.contains("the CPUs this process may run on"), "{e}");
    }
}
