//! Turning client and broker requests into metadata records — or refusing them.
//!
//! Owns: every check a request must pass before its record may enter the raft log (topic names,
//! partition counts, replication factors, config keys and values, broker epochs), and the choices
//! the controller makes while doing so (replica placement — decided by `spool_core::placement` —
//! broker epochs, producer-id blocks).
//! Promises: pure functions of `(image, request)`; a refused request returns a [`Refusal`] carrying
//! Kafka's error code and a human message, and produces no record, so it never enters the log.
//! A record produced here applies cleanly to the image it was validated against.
//! Never does: I/O, clocks or randomness — a new topic's id is an input (the [`crate::Controller`]
//! makes one), so the same inputs give the same record on every run.

use spool_core::liveness::{may_unfence, UnfenceCheck};
use spool_core::placement::{place_replicas, PlacementBroker};
use spool_protocol::metadata_records::{MetadataRecordT, PartitionAssignmentT};
use spool_protocol::ErrorCode;

use crate::image::{BrokerListener, MetadataImage, TopicId, Uuid128};
use crate::records;
use crate::topic_config::check_topic_config;

/// Kafka's longest legal topic name.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Why a request was refused: Kafka's code and a message for the response's `error_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} ({}): {}",
            self.code, self.code as i16, self.message
        )
    }
}

impl std::error::Error for Refusal {}

/// Defaults and limits the controller applies to CreateTopics (validated once at start-up by
/// the broker's config layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateTopicPolicy {
    /// Used when a request asks for `-1` partitions (Kafka's `num.partitions`).
    pub default_partitions: i32,
    /// Used when a request asks for replication factor `-1` (`default.replication.factor`).
    pub default_replication_factor: i16,
    /// Upper bound on one topic's partition count.
    pub partitions_per_topic_max: i32,
}

impl Default for CreateTopicPolicy {
    fn default() -> Self {
        CreateTopicPolicy {
            default_partitions: 1,
            default_replication_factor: 1,
            partitions_per_topic_max: 10_000,
        }
    }
}

/// One topic of a CreateTopics request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTopicRequest {
    pub name: String,
    /// `-1`: the policy's default.
    pub num_partitions: i32,
    /// `-1`: the policy's default.
    pub replication_factor: i16,
    /// Kafka config names and values; a `None` value is refused (as Kafka does on create).
    pub configs: Vec<(String, Option<String>)>,
}

impl CreateTopicRequest {
    /// A request with `partitions` partitions, the default replication factor and no configs.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        CreateTopicRequest {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }

    /// Adds one config.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), Some(value.into())));
        self
    }
}

/// A broker registering (at start-up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBrokerRequest {
    pub broker_id: i32,
    pub incarnation_id: Uuid128,
    pub listeners: Vec<BrokerListener>,
    pub rack: Option<String>,
    /// The cluster the broker's data directory belongs to (`None`: a fresh directory, which
    /// joins whichever cluster it registers with).
    pub cluster_id: Option<Uuid128>,
    /// Filled in by the active controller, not the broker: whether the broker id's current
    /// registration still has a live session (a heartbeat within the session timeout).
    pub registered_session_live: bool,
    /// The broker epoch it had when it last shut down cleanly (-1: none, or it crashed). Not
    /// the registered epoch: the registration follows an unclean shutdown.
    pub previous_broker_epoch: i64,
}

/// A broker's heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The last metadata log index the broker has applied.
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// Kafka's topic-name rule: 1..=249 bytes of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn check_topic_name(name: &str) -> Result<(), Refusal> {
    let invalid = |why: String| Err(Refusal::new(ErrorCode::InvalidTopicException, why));
    if name.is_empty() {
        return invalid("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return invalid(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return invalid(format!(
            "topic name is {} bytes, the limit is {TOPIC_NAME_BYTES_MAX}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!(
            "topic name {name:?} contains {c:?}; legal are [a-zA-Z0-9._-]"
        ));
    }
    Ok(())
}

/// Kafka refuses names that differ from an existing one only by `.` vs `_` (their metric names
/// collide).
fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

/// Validates one CreateTopics topic and, if it passes, returns its `CreateTopic` record.
/// `topic_id` must be fresh and non-zero (the controller generates it).
pub fn validate_create_topic(
    image: &MetadataImage,
    request: &CreateTopicRequest,
    topic_id: TopicId,
    policy: &CreateTopicPolicy,
) -> Result<MetadataRecordT, Refusal> {
    check_topic_name(&request.name)?;
    if image.topic(&request.name).is_some() {
        return Err(Refusal::new(
            ErrorCode::TopicAlreadyExists,
            format!("topic {:?} already exists", request.name),
        ));
    }
    let key = collision_key(&request.name);
    if let Some(other) = image.topics().find(|t| collision_key(&t.name) == key) {
        return Err(Refusal::new(
            ErrorCode::InvalidTopicException,
            format!(
                "topic {:?} collides with existing topic {:?} ('.' and '_' collide)",
                request.name, other.name
            ),
        ));
    }
    let partitions = match request.num_partitions {
        -1 => policy.default_partitions,
        n => n,
    };
    if partitions < 1 || partitions > policy.partitions_per_topic_max {
        return Err(Refusal::new(
            ErrorCode::InvalidPartitions,
            format!(
                "{} partitions; must be between 1 and {}",
                request.num_partitions, policy.partitions_per_topic_max
            ),
        ));
    }
    let replication_factor = match request.replication_factor {
        -1 => policy.default_replication_factor,
        n => n,
    };
    let live_brokers = image.unfenced_broker_ids().len();
    if replication_factor < 1 || replication_factor as usize > live_brokers {
        return Err(Refusal::new(
            ErrorCode::InvalidReplicationFactor,
            format!(
                "replication factor {} cannot be met: {} unfenced broker(s) registered",
                request.replication_factor, live_brokers
            ),
        ));
    }
    let mut configs = Vec::with_capacity(request.configs.len());
    for (i, (k, v)) in request.configs.iter().enumerate() {
        check_topic_config(k, v.as_deref())
            .map_err(|m| Refusal::new(ErrorCode::InvalidConfig, m))?;
        if request.configs[..i].iter().any(|(earlier, _)| earlier == k) {
            return Err(Refusal::new(
                ErrorCode::InvalidConfig,
                format!("topic config {k:?} given twice"),
            ));
        }
        configs.push(records::topic_config(k, v.as_deref()));
    }
    if topic_id.is_zero() || image.topic_by_id(topic_id).is_some() {
        return Err(Refusal::new(
            ErrorCode::TopicAlreadyExists,
            format!("topic id {topic_id:?} is zero or already used"),
        ));
    }
    let assignments = assign_replicas(image, partitions, replication_factor, topic_id.low)?;
    Ok(records::create_topic(
        &request.name,
        topic_id,
        configs,
        assignments,
    ))
}

/// Places the new topic's replicas with [`spool_core::placement`]: distinct unfenced brokers,
/// spread over racks, replicas and preferred leaders balanced against every existing topic. The
/// topic id's low half breaks ties, so topics created into an equally loaded cluster do not all
/// start on the same broker. The first replica leads; the ISR starts as the whole replica set.
/// `start` breaks placement ties (CreateTopics passes the topic id's low half).
pub(crate) fn assign_replicas(
    image: &MetadataImage,
    partitions: i32,
    replication_factor: i16,
    start: u64,
) -> Result<Vec<PartitionAssignmentT>, Refusal> {
    let brokers: Vec<PlacementBroker> = image
        .brokers()
        .map(|b| PlacementBroker {
            broker_id: b.broker_id,
            rack: b.rack.clone(),
            fenced: b.fenced,
        })
        .collect();
    let existing = image
        .topics()
        .flat_map(|t| t.partitions.iter().map(|p| p.replicas.as_slice()));
    // Callers checked 1 <= partitions and 1 <= replication_factor, so both convert.
    let placed = place_replicas(
        &brokers,
        existing,
        usize::try_from(partitions).unwrap_or(0),
        usize::try_from(replication_factor).unwrap_or(0),
        start,
    )
    .map_err(|e| Refusal::new(ErrorCode::InvalidReplicationFactor, e.to_string()))?;
    assert_eq!(placed.len() as i64, i64::from(partitions));
    Ok(placed
        .into_iter()
        .zip(0..)
        .map(|(replicas, p)| {
            // place_replicas returns replication_factor >= 1 replicas per partition.
            let leader = replicas[0];
            records::partition_assignment(p, replicas.clone(), replicas, leader, 0, 0)
        })
        .collect())
}

/// Validates deleting a topic by name.
pub fn validate_delete_topic(
    image: &MetadataImage,
    name: &str,
) -> Result<MetadataRecordT, Refusal> {
    let topic = image.topic(name).ok_or_else(|| {
        Refusal::new(
            ErrorCode::UnknownTopicOrPartition,
            format!("topic {name:?} does not exist"),
        )
    })?;
    Ok(records::delete_topic(&topic.name, topic.topic_id))
}

/// Validates a broker registration; the new broker epoch is one past the largest ever given.
/// The broker starts fenced; its first caught-up heartbeat unfences it.
pub fn validate_register_broker(
    image: &MetadataImage,
    request: &RegisterBrokerRequest,
) -> Result<MetadataRecordT, Refusal> {
    if request.broker_id < 0 {
        return Err(Refusal::new(
            ErrorCode::InvalidRequest,
            format!("broker id {} is negative", request.broker_id),
        ));
    }
    if let (Some(theirs), Some(ours)) = (request.cluster_id, image.cluster_id()) {
        if theirs != ours {
            return Err(Refusal::new(
                ErrorCode::InconsistentClusterId,
                format!(
                    "broker {}'s data directory belongs to cluster {}, not to this cluster ({}); start it with an empty data directory to join this cluster",
                    request.broker_id,
                    theirs.to_hex(),
                    ours.to_hex()
                ),
            ));
        }
    }
    if let Some(current) = image.broker(request.broker_id) {
        // Kafka's rule (KIP-631): a different incarnation may take over an id only once the
        // current one's session is gone — fenced, and no heartbeat within the session timeout.
        // A restart after `kill -9` waits for that; a second process given the same id is
        // refused for as long as the first one lives.
        let other_incarnation = current.incarnation_id != Some(request.incarnation_id);
        if other_incarnation && (!current.fenced || request.registered_session_live) {
            let address = current
                .listeners
                .iter()
                .find(|l| l.name == "internal")
                .or_else(|| current.listeners.first())
                .map(|l| format!("{}:{}", l.host, l.port))
                .unwrap_or_else(|| "an unknown address".into());
            return Err(Refusal::new(
                ErrorCode::DuplicateBrokerRegistration,
                format!(
                    "node id {} is in use by a live broker at {address}; give this broker another --node-id, or stop that one first",
                    request.broker_id
                ),
            ));
        }
    }
    let listeners = request
        .listeners
        .iter()
        .map(|l| records::listener(&l.name, &l.host, l.port))
        .collect();
    // Kafka's rule: a broker that registered before and does not bring back the epoch it had
    // (its data directory records it: `spool_broker::clean_shutdown`) may have lost its log. The
    // same incarnation registering again (its answer was lost, or its session expired while it
    // ran) restarted nothing, so it lost nothing.
    let unclean = image.broker(request.broker_id).is_some_and(|b| {
        b.incarnation_id != Some(request.incarnation_id)
            && b.broker_epoch != request.previous_broker_epoch
    });
    Ok(records::with_unclean_shutdown(
        records::register_broker(
            request.broker_id,
            Some(request.incarnation_id),
            image.max_broker_epoch().saturating_add(1),
            listeners,
            request.rack.clone(),
        ),
        unclean,
    ))
}

/// Decides what a heartbeat changes. `Ok(None)`: nothing to write (the common case: heartbeats
/// are not logged unless they change state). A fenced broker that asks to run and has applied
/// the log up to `caught_up_offset` (a committed offset at or after its fence) is unfenced
/// ([`spool_core::liveness::may_unfence`]); a broker asking to be fenced or to shut down
/// gets a `BrokerHeartbeat` record saying so.
pub fn validate_heartbeat(
    image: &MetadataImage,
    request: &HeartbeatRequest,
    caught_up_offset: i64,
) -> Result<Option<MetadataRecordT>, Refusal> {
    let broker = image.broker(request.broker_id).ok_or_else(|| {
        Refusal::new(
            ErrorCode::BrokerNotAvailable,
            format!("broker {} is not registered", request.broker_id),
        )
    })?;
    if broker.broker_epoch != request.broker_epoch {
        return Err(Refusal::new(
            ErrorCode::StaleBrokerEpoch,
            format!(
                "broker {} epoch {} is not the registered {}",
                request.broker_id, request.broker_epoch, broker.broker_epoch
            ),
        ));
    }
    let changes_state = (request.want_fence && !broker.fenced)
        || request.want_shutdown != broker.in_controlled_shutdown;
    if changes_state {
        return Ok(Some(records::broker_heartbeat(
            request.broker_id,
            request.broker_epoch,
            request.current_metadata_offset,
            request.want_fence,
            request.want_shutdown,
        )));
    }
    let heartbeat = UnfenceCheck {
        fenced: broker.fenced,
        want_fence: request.want_fence,
        want_shutdown: request.want_shutdown,
        current_metadata_offset: request.current_metadata_offset,
    };
    if may_unfence(&heartbeat, caught_up_offset) {
        return Ok(Some(records::unfence_broker(
            request.broker_id,
            request.broker_epoch,
        )));
    }
    Ok(None)
}

/// Validates handing a block of `block_size` producer ids to a broker.
pub fn validate_allocate_producer_ids(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
    block_size: i32,
) -> Result<MetadataRecordT, Refusal> {
    match image.broker(broker_id) {
        None => {
            return Err(Refusal::new(
                ErrorCode::BrokerNotAvailable,
                format!("broker {broker_id} is not registered"),
            ))
        }
        Some(b) if b.broker_epoch != broker_epoch => {
            return Err(Refusal::new(
                ErrorCode::StaleBrokerEpoch,
                format!("broker {broker_id} epoch {broker_epoch} is stale"),
            ))
        }
        Some(_) => {}
    }
    let first = image.next_producer_id();
    if block_size <= 0 || first.checked_add(i64::from(block_size)).is_none() {
        return Err(Refusal::new(
            ErrorCode::InvalidRequest,
            format!("producer id block of {block_size} cannot be allocated at {first}"),
        ));
    }
    Ok(records::producer_id_block(
        broker_id,
        broker_epoch,
        first,
        block_size,
    ))
}
