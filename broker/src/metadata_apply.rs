//! Applying committed metadata on one core (DESIGN §4): each record goes into this core's image in
//! commit order, then the partitions the shard map gives this core are opened (and those of a
//! deleted topic closed and removed), and the group driver is told which `__consumer_offsets`
//! partitions it now serves. A topic config change reaches the open logs of the topic at once.
//!
//! Records were validated before they were committed; one this build cannot decode or apply is
//! logged and skipped (the controller's image is the authority). Nothing here blocks the core: a
//! deleted partition's directory is removed on the blocking pool.

use std::rc::Rc;

use spool_protocol::metadata_records::{MetadataRecordBody, MetadataRecordBodyT, MetadataRecordT};
use spool_raft::Uuid128;
use spool_storage::PartitionLog;

use crate::group::driver::GroupDriver;
use crate::group::OFFSETS_TOPIC;
use crate::local::Local;
use crate::partition::{log_error_code, Committed, Partition};
use crate::requests::TopicPartition;
use crate::router::Router;
use crate::stall_watch::watch;
use crate::topic_config::log_config_for;
use crate::txn::driver::TxnDriver;
use crate::txn::TRANSACTION_STATE_TOPIC;

/// Applies `records` (encoded `MetadataRecord`s, in commit order) on this core.
pub async fn apply(
    local: &Rc<Local>,
    router: &Router,
    groups: &Rc<GroupDriver>,
    txns: &Rc<TxnDriver>,
    records: &[Vec<u8>],
) {
    for bytes in records {
        let record = match spool_protocol::metadata_log::decode(bytes) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(
                    core = local.core,
                    "undecodable committed metadata record: {e}"
                );
                continue;
            }
        };
        let dropped = topic_being_deleted(local, &record);
        let reconfigured = match &record.body {
            MetadataRecordBodyT::SetTopicConfigs(r) => Some(Uuid128::from(&r.topic_id)),
            _ => None,
        };
        if let Err(code) = local.image.borrow_mut().apply(&record) {
            tracing::error!(
                core = local.core,
                ?code,
                "could not apply a committed metadata record"
            );
            continue;
        }
        if let Some((name, partitions)) = dropped {
            for p in 0..partitions {
                let tp = TopicPartition::new(name.clone(), p);
                watch(
                    || format!("{tp}: deleting"),
                    drop_partition(local, router, groups, txns, &tp),
                )
                .await;
            }
            // Committed offsets of a deleted topic go too (tombstones), off this path.
            let groups = Rc::clone(groups);
            glommio::spawn_local(async move { groups.topic_deleted(&name).await }).detach();
        }
        if let Some(topic_id) = reconfigured {
            let name = local
                .image
                .borrow()
                .topic_by_id(topic_id)
                .map(|t| t.name.clone());
            if let Some(name) = name {
                follow_topic_configs(local, Some(&name));
            }
        }
        open_assigned_partitions(local, router, groups, txns).await;
    }
}

/// A topic config change acts on the open partitions at once, as in Kafka: each open log of
/// `topic` (of every topic, with `None`) takes the settings its topic now resolves to
/// (`PartitionLog::set_topic_settings`). What the broker reads from the image on each request
/// (`min.insync.replicas`, `max.message.bytes`, `replica.lag.time.max.ms`) needs nothing here.
fn follow_topic_configs(local: &Local, topic: Option<&str>) {
    let image = local.image.borrow();
    for (tp, part) in local.partitions.borrow().iter() {
        if topic.is_some_and(|t| t != tp.topic) {
            continue;
        }
        if let Some(t) = image.topic(&tp.topic) {
            part.log
                .set_topic_settings(&log_config_for(&local.config, t));
        }
    }
}

/// Replaces this core's image with the one `records` describe (a snapshot's records, from an
/// empty image): topics that are gone (by name, or recreated under a new id) have their
/// partitions closed and removed, as a DeleteTopic would; then the assigned partitions open.
pub async fn replace(
    local: &Rc<Local>,
    router: &Router,
    groups: &Rc<GroupDriver>,
    txns: &Rc<TxnDriver>,
    records: &[Vec<u8>],
) {
    let mut fresh = spool_raft::MetadataImage::new();
    for bytes in records {
        match spool_protocol::metadata_log::decode(bytes) {
            Ok(r) => {
                if let Err(code) = fresh.apply(&r) {
                    tracing::error!(core = local.core, ?code, "a snapshot record does not apply");
                }
            }
            Err(e) => tracing::error!(core = local.core, "undecodable snapshot record: {e}"),
        }
    }
    let gone: Vec<(String, i32)> = local
        .image
        .borrow()
        .topics()
        .filter(|t| {
            fresh
                .topic(&t.name)
                .is_none_or(|n| n.topic_id != t.topic_id)
        })
        .map(|t| (t.name.clone(), t.partitions.len() as i32))
        .collect();
    *local.image.borrow_mut() = fresh;
    // Topics that stay may have changed configs while this broker lagged.
    follow_topic_configs(local, None);
    for (name, partitions) in gone {
        for p in 0..partitions {
            let tp = TopicPartition::new(name.clone(), p);
            drop_partition(local, router, groups, txns, &tp).await;
        }
        let groups = Rc::clone(groups);
        glommio::spawn_local(async move { groups.topic_deleted(&name).await }).detach();
    }
    open_assigned_partitions(local, router, groups, txns).await;
}

/// For a DeleteTopic record: the topic's name and partition count before it goes.
fn topic_being_deleted(local: &Local, record: &MetadataRecordT) -> Option<(String, i32)> {
    if record.body.metadata_record_body_type() != MetadataRecordBody::DeleteTopic {
        return None;
    }
    let del = record.body.as_delete_topic()?;
    let image = local.image.borrow();
    let topic = image.topic(&del.name)?;
    Some((topic.name.clone(), topic.partitions.len() as i32))
}

/// Opens every partition of the image that this core owns and has not opened yet.
async fn open_assigned_partitions(
    local: &Rc<Local>,
    router: &Router,
    groups: &Rc<GroupDriver>,
    txns: &Rc<TxnDriver>,
) {
    if let Some(n) = local.partition_count(OFFSETS_TOPIC) {
        groups.set_partition_count(n);
    }
    let wanted: Vec<(TopicPartition, spool_storage::LogConfig)> = {
        let image = local.image.borrow();
        let opened = local.partitions.borrow();
        let mut out = Vec::new();
        for topic in image.topics() {
            for (p, state) in topic.partitions.iter().enumerate() {
                // Only this broker's replicas open here (on one node: all of them).
                if !state.replicas.contains(&local.config.node_id) {
                    continue;
                }
                let tp = TopicPartition::new(topic.name.clone(), p as i32);
                if router.assign(&tp) == local.core && !opened.contains_key(&tp) {
                    out.push((tp, log_config_for(&local.config, topic)));
                }
            }
        }
        out
    };
    // Groups of offsets partitions about to open here, that this broker leads, wait
    // (COORDINATOR_LOAD_IN_PROGRESS) rather than being told this core is not their coordinator
    // while the opens below run.
    for (tp, _) in &wanted {
        if tp.topic == OFFSETS_TOPIC && leads(local, tp) {
            groups.expect_load(tp.partition);
        }
    }
    for (tp, log_config) in wanted {
        let dir = local.config.data_dir.join(tp.to_string());
        let opened = watch(
            || format!("{tp}: opening its log"),
            PartitionLog::open(&dir, log_config),
        )
        .await;
        match opened {
            Ok((log, stats)) => {
                tracing::debug!(core = local.core, %tp, ?stats, "opened partition");
                let part = Partition::new(
                    tp.clone(),
                    log,
                    local.config.node_id,
                    local.config.durability,
                    local.config.fetch_copy,
                );
                // Its role before anyone can reach it: leading, or following the leader.
                if let Some(c) = committed(local, &tp) {
                    let now_ms = crate::clock::monotonic_ms();
                    watch(
                        || format!("{tp}: taking its role on opening"),
                        part.learn(&c, now_ms),
                    )
                    .await;
                }
                local
                    .partitions
                    .borrow_mut()
                    .insert(tp.clone(), Rc::clone(&part));
                if tp.topic == OFFSETS_TOPIC && leads(local, &tp) {
                    groups.begin_load(part, tp.partition);
                } else if tp.topic == TRANSACTION_STATE_TOPIC && leads(local, &tp) {
                    txns.begin_load(part, tp.partition);
                }
            }
            Err(e) => {
                tracing::error!(core = local.core, %tp, code = ?log_error_code(&e), "cannot open partition: {e}");
                if tp.topic == OFFSETS_TOPIC {
                    groups.unload(tp.partition).await;
                }
            }
        }
    }
    follow_partition_states(local).await;
    follow_offsets_leadership(local, groups).await;
    follow_txn_state_leadership(local, txns);
}

/// Every open partition takes its committed state from the image (`Partition::learn`): a new
/// leader or leader epoch, an ISR change, or leadership taken or lost.
async fn follow_partition_states(local: &Local) {
    let parts: Vec<(TopicPartition, Rc<Partition>)> = local
        .partitions
        .borrow()
        .iter()
        .map(|(tp, p)| (tp.clone(), Rc::clone(p)))
        .collect();
    let now_ms = crate::clock::monotonic_ms();
    for (tp, part) in parts {
        if let Some(c) = committed(local, &tp) {
            watch(
                || format!("{tp}: taking leader {} epoch {}", c.leader, c.leader_epoch),
                part.learn(&c, now_ms),
            )
            .await;
        }
    }
}

/// `tp`'s committed state in this core's image, as [`Partition::learn`] takes it.
pub fn committed(local: &Local, tp: &TopicPartition) -> Option<Committed> {
    let image = local.image.borrow();
    let topic = image.topic(&tp.topic)?;
    let p = topic.partitions.get(usize::try_from(tp.partition).ok()?)?;
    let config = crate::topic_config::resolved(&local.config, topic);
    let me = image.broker(local.config.node_id);
    // A restarted broker replays the metadata log from its own disk first: until its image
    // holds this process's registration, a leadership it names for this broker is a past
    // one (the controller has moved it, or will once it fences the old incarnation), so the
    // replica leads nothing and cannot acknowledge what the real leader will not have.
    let current = !local.config.clustered()
        || me.is_some_and(|b| b.incarnation_id == Some(local.config.incarnation));
    Some(Committed {
        leader: if p.leader == local.config.node_id && !current {
            crate::partition::NO_LEADER
        } else {
            p.leader
        },
        leader_epoch: p.leader_epoch.max(0),
        partition_epoch: p.partition_epoch,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        min_insync_replicas: config.required_isr(p.replicas.len()),
        broker_epoch: me.filter(|_| current).map_or(-1, |b| b.broker_epoch),
    })
}

/// Whether this broker leads `tp` in this core's image.
fn leads(local: &Local, tp: &TopicPartition) -> bool {
    local
        .image
        .borrow()
        .topic(&tp.topic)
        .and_then(|t| t.partitions.get(tp.partition as usize).map(|p| p.leader))
        == Some(local.config.node_id)
}

/// A group's coordinator is the leader of its offsets partition (DESIGN §8): this core loads
/// the groups of each offsets partition it has open and this broker now leads, and unloads
/// those another broker leads now (their members get NOT_COORDINATOR and find the new one).
async fn follow_offsets_leadership(local: &Rc<Local>, groups: &Rc<GroupDriver>) {
    let opened: Vec<(i32, Rc<Partition>)> = local
        .partitions
        .borrow()
        .iter()
        .filter(|(tp, _)| tp.topic == OFFSETS_TOPIC)
        .map(|(tp, p)| (tp.partition, Rc::clone(p)))
        .collect();
    for (partition, part) in opened {
        let leads_it = leads(local, &TopicPartition::new(OFFSETS_TOPIC, partition));
        match (leads_it, groups.serves(partition)) {
            (true, false) => groups.begin_load(part, partition),
            (false, true) => {
                let what = || format!("unloading the groups of {OFFSETS_TOPIC}-{partition}");
                watch(what, groups.unload(partition)).await;
            }
            _ => {}
        }
    }
}

/// A transaction coordinator is the leader of its id's `__transaction_state` partition (DESIGN
/// §9): as for groups, this core loads the ids of each such partition it has open and this
/// broker now leads, and unloads those another broker leads now.
fn follow_txn_state_leadership(local: &Rc<Local>, txns: &Rc<TxnDriver>) {
    let opened: Vec<(i32, Rc<Partition>)> = local
        .partitions
        .borrow()
        .iter()
        .filter(|(tp, _)| tp.topic == TRANSACTION_STATE_TOPIC)
        .map(|(tp, p)| (tp.partition, Rc::clone(p)))
        .collect();
    for (partition, part) in opened {
        let leads_it = leads(
            local,
            &TopicPartition::new(TRANSACTION_STATE_TOPIC, partition),
        );
        match (leads_it, txns.serves(partition)) {
            (true, false) => txns.begin_load(part, partition),
            (false, true) => txns.unload(partition),
            _ => {}
        }
    }
}

async fn drop_partition(
    local: &Local,
    router: &Router,
    groups: &GroupDriver,
    txns: &TxnDriver,
    tp: &TopicPartition,
) {
    router.unassign(tp);
    let part = local.partitions.borrow_mut().remove(tp);
    if tp.topic == OFFSETS_TOPIC {
        groups.unload(tp.partition).await;
    }
    if tp.topic == TRANSACTION_STATE_TOPIC {
        txns.unload(tp.partition);
    }
    if let Some(part) = part {
        if let Err(e) = part.log.close().await {
            tracing::warn!(%tp, "closing a deleted partition: {e}");
        }
        let dir = part.log.dir().to_path_buf();
        // remove_dir_all walks and unlinks a whole directory: the blocking pool, not the core.
        if let Err(e) = spool_storage::remove_dir_all(dir.clone()).await {
            tracing::warn!(%tp, "removing {}: {e}", dir.display());
        }
    }
}
