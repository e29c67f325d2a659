//! What the application hears about its group membership: Kafka's ConsumerRebalanceListener
//! (assigned, revoked, lost) plus the outcome of every commit, and the driver-side bookkeeping
//! that turns [`GroupEvent`]s into calls on the fetching core and the listener — shared by the
//! blocking and glommio consumers.

use std::collections::BTreeMap;

use crate::client::consumer::{ConsumerCore, SeekTo};
use crate::client::{ClientError, TopicPartition};

use super::member::{CommitKind, GroupEvent};

/// Rebalance callbacks. Every method has a default that does nothing, except `on_lost`, which
/// calls `on_revoked` as Kafka's does.
pub trait RebalanceListener {
    /// Partitions newly given to this member in `generation` (possibly none: a rebalance that
    /// changed nothing here). Called after their starting offsets are set, so a `seek` here wins.
    fn on_assigned(&mut self, _generation: i32, _partitions: &[TopicPartition]) {}
    /// Partitions taken away. Processed positions were already committed (with auto-commit).
    fn on_revoked(&mut self, _generation: i32, _partitions: &[TopicPartition]) {}
    /// Partitions lost without a commit (the generation ended under us).
    fn on_lost(&mut self, generation: i32, partitions: &[TopicPartition]) {
        self.on_revoked(generation, partitions);
    }
    /// A commit finished (auto, async, sync, on revocation or on close).
    fn on_commit(
        &mut self,
        _kind: CommitKind,
        _result: Result<&[(TopicPartition, i64)], &ClientError>,
    ) {
    }
}

/// A listener that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoListener;

impl RebalanceListener for NoListener {}

/// Applies group events to the fetching core and the listener; remembers commit outcomes for
/// `commit_sync` and the first fatal error.
#[derive(Debug, Default)]
pub(crate) struct EventSink {
    pub commit_results: BTreeMap<u64, Result<(), ClientError>>,
    pub fatal: Option<ClientError>,
}

/// Finished commits remembered for `commit_sync` at most (older ones nobody waits for).
const COMMIT_RESULTS_MAX: usize = 64;

impl EventSink {
    pub fn apply(
        &mut self,
        events: Vec<GroupEvent>,
        consumer: &mut ConsumerCore,
        listener: &mut dyn RebalanceListener,
    ) {
        for event in events {
            match event {
                GroupEvent::Revoked {
                    generation,
                    partitions,
                    lost,
                } => {
                    let keep: Vec<TopicPartition> = consumer
                        .assignment()
                        .into_iter()
                        .filter(|tp| !partitions.contains(tp))
                        .collect();
                    consumer.assign(keep);
                    if lost {
                        listener.on_lost(generation, &partitions);
                    } else {
                        listener.on_revoked(generation, &partitions);
                    }
                }
                GroupEvent::Assigned {
                    generation,
                    added,
                    assignment,
                    start_offsets,
                } => {
                    consumer.assign(assignment);
                    for (tp, offset) in start_offsets {
                        // Assigned just above, so the seek cannot fail.
                        let _ = consumer.seek(&tp, SeekTo::Offset(offset));
                    }
                    listener.on_assigned(generation, &added);
                }
                GroupEvent::Committed { id, kind, offsets } => {
                    listener.on_commit(kind, Ok(&offsets));
                    self.remember(id, Ok(()));
                }
                GroupEvent::CommitFailed { id, kind, error } => {
                    listener.on_commit(kind, Err(&error));
                    self.remember(id, Err(error));
                }
                GroupEvent::Fatal(e) => {
                    self.fatal.get_or_insert(e);
                }
            }
        }
    }

    fn remember(&mut self, id: u64, result: Result<(), ClientError>) {
        self.commit_results.insert(id, result);
        while self.commit_results.len() > COMMIT_RESULTS_MAX {
            self.commit_results.pop_first();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::consumer::ConsumerConfig;

    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl RebalanceListener for Recorder {
        fn on_assigned(&mut self, generation: i32, partitions: &[TopicPartition]) {
            self.0.push(format!("assigned {generation} {partitions:?}"));
        }
        fn on_revoked(&mut self, generation: i32, partitions: &[TopicPartition]) {
            self.0.push(format!("revoked {generation} {partitions:?}"));
        }
    }

    #[test]
    fn assigned_partitions_start_at_committed_offsets_and_revoked_ones_stop() {
        let mut consumer =
            ConsumerCore::new(ConsumerConfig::default(), vec!["b:1".into()]).unwrap();
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let mut sink = EventSink::default();
        let mut listener = Recorder::default();
        sink.apply(
            vec![GroupEvent::Assigned {
                generation: 4,
                added: vec![a.clone(), b.clone()],
                assignment: vec![a.clone(), b.clone()],
                start_offsets: vec![(a.clone(), 17)],
            }],
            &mut consumer,
            &mut listener,
        );
        assert_eq!(consumer.assignment(), vec![a.clone(), b.clone()]);
        assert_eq!(consumer.position(&a), Some(17), "the committed offset");
        assert_eq!(
            consumer.position(&b),
            None,
            "auto_offset_reset: looked up later"
        );
        sink.apply(
            vec![
                GroupEvent::Revoked {
                    generation: 4,
                    partitions: vec![a.clone()],
                    lost: true,
                },
                GroupEvent::Fatal(ClientError::Closed),
            ],
            &mut consumer,
            &mut listener,
        );
        assert_eq!(consumer.assignment(), vec![b.clone()]);
        assert_eq!(
            listener.0,
            vec![
                format!("assigned 4 {:?}", [&a, &b]),
                format!("revoked 4 {:?}", [&a]),
            ],
            "on_lost falls back to on_revoked"
        );
        assert_eq!(sink.fatal, Some(ClientError::Closed));
    }
}
