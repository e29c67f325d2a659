//! Blocking consumer: `poll` drives the [`ConsumerCore`] on the caller's thread until records
//! arrive, an error is reported, or the timeout passes.
//!
//! With [`Consumer::subscribe`] the consumer joins `group_id` and the same calls also drive the
//! [`GroupCore`]: rebalance callbacks run inside `poll` (and `commit_sync`, `close`) on the
//! caller's thread. Kafka's at-least-once model: the records a `poll` returns count as processed
//! at the next `poll`, commit or close, which commit the positions after them.
//!
//! Unlike Kafka's Java client there is no background heartbeat thread: heartbeats go out while
//! the application is inside `poll` (or `commit_sync`, `close`), so the time spent processing
//! between two polls must stay below `session_timeout_ms`, not only `max_poll_interval_ms`, or
//! the coordinator drops the member (it then loses its partitions and rejoins at the next poll).

use std::time::{Duration, Instant};

use crate::client::consumer::{ConsumerConfig, ConsumerCore, SeekTo};
use crate::client::group::both::Both;
use crate::client::group::listener::EventSink;
use crate::client::group::{CommitKind, GroupCore, RebalanceListener};
use crate::client::{ClientError, ConsumerRecord, TopicPartition};

use super::net::BlockingNet;

struct Membership {
    core: GroupCore,
    listener: Box<dyn RebalanceListener + Send>,
    sink: EventSink,
}

pub struct Consumer {
    core: ConsumerCore,
    net: BlockingNet,
    bootstrap: Vec<String>,
    group: Option<Membership>,
    /// Records returned per `poll` at most (Kafka `max.poll.records`).
    pub max_poll_records: usize,
}

impl Consumer {
    pub fn new(bootstrap: &[&str], config: ConsumerConfig) -> Result<Self, ClientError> {
        let net = BlockingNet::new(config.frame_limits, config.request_timeout_ms);
        let bootstrap: Vec<String> = bootstrap.iter().map(|s| (*s).to_owned()).collect();
        let core = ConsumerCore::new(config, bootstrap.clone())?;
        Ok(Self {
            core,
            net,
            bootstrap,
            group: None,
            max_poll_records: 500,
        })
    }

    /// Joins `config.group_id` subscribed to `topics`; partitions come and go through `listener`
    /// during `poll`. Replaces any manual assignment.
    pub fn subscribe(
        &mut self,
        topics: &[&str],
        listener: impl RebalanceListener + Send + 'static,
    ) -> Result<(), ClientError> {
        let topics = topics.iter().map(|t| (*t).to_owned()).collect();
        let core = GroupCore::new(
            self.core.config().clone(),
            self.bootstrap.clone(),
            topics,
            super::now_ms(),
        )?;
        self.core.assign(Vec::new());
        self.group = Some(Membership {
            core,
            listener: Box::new(listener),
            sink: EventSink::default(),
        });
        Ok(())
    }

    /// The group generation (-1 outside a group or between generations).
    pub fn generation(&self) -> i32 {
        self.group.as_ref().map_or(-1, |g| g.core.generation())
    }

    /// The member id the coordinator gave this consumer ("" before it joined).
    pub fn member_id(&self) -> &str {
        self.group.as_ref().map_or("", |g| g.core.member_id())
    }

    /// One network round for both cores, then the group's events applied.
    fn step(&mut self, max_wait: Duration) -> Result<(), ClientError> {
        let mut both = Both {
            consumer: &mut self.core,
            group: self.group.as_mut().map(|g| &mut g.core),
        };
        self.net.step(&mut both, max_wait);
        self.apply_events()
    }

    fn apply_events(&mut self) -> Result<(), ClientError> {
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        let events = g.core.take_events();
        g.sink.apply(events, &mut self.core, g.listener.as_mut());
        match &g.sink.fatal {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Commits the processed positions and waits for the answer (retrying retriable errors up
    /// to `request_timeout_ms`). `Ok` at once when nothing is new.
    pub fn commit_sync(&mut self) -> Result<(), ClientError> {
        self.commit_and_wait(CommitKind::Sync)
    }

    /// Queues a commit of the processed positions; never retried. The outcome reaches the
    /// listener's `on_commit` during a later `poll`.
    pub fn commit_async(&mut self) -> Result<(), ClientError> {
        let g = self
            .group
            .as_mut()
            .ok_or(ClientError::InvalidConfig("commit needs subscribe".into()))?;
        let _ = g.core.commit(CommitKind::Async, super::now_ms());
        Ok(())
    }

    fn commit_and_wait(&mut self, kind: CommitKind) -> Result<(), ClientError> {
        let g = self
            .group
            .as_mut()
            .ok_or(ClientError::InvalidConfig("commit needs subscribe".into()))?;
        let Some(id) = g.core.commit(kind, super::now_ms()) else {
            return Ok(());
        };
        loop {
            if let Some(r) = self
                .group
                .as_mut()
                .and_then(|g| g.sink.commit_results.remove(&id))
            {
                return r;
            }
            self.step(Duration::from_millis(1000))?;
        }
    }

    /// Leaves the group: commits the processed positions (with `auto_commit`), revokes every
    /// partition through the listener, and sends LeaveGroup unless the member is static; at most
    /// `close_timeout_ms`.
    pub fn close(mut self) -> Result<(), ClientError> {
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        let timeout_ms = self.core.config().close_timeout_ms;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        g.core.close(super::now_ms());
        loop {
            self.step(Duration::from_millis(100))?;
            if self.group.as_ref().is_none_or(|g| g.core.is_closed()) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ClientError::Timeout {
                    what: "closing the group member".into(),
                    timeout_ms,
                });
            }
        }
    }

    pub fn assign(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        self.core.assign(partitions);
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.core.assignment()
    }

    pub fn seek(&mut self, tp: &TopicPartition, to: SeekTo) -> Result<(), ClientError> {
        self.core.seek(tp, to)
    }

    /// Stops fetching `tp` until `resume` (records already fetched are still returned).
    pub fn pause(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.core.pause(tp)
    }

    pub fn resume(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.core.resume(tp)
    }

    pub fn seek_to_beginning(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.core.seek(tp, SeekTo::Earliest)
    }

    pub fn seek_to_end(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.core.seek(tp, SeekTo::Latest)
    }

    pub fn seek_to_timestamp(
        &mut self,
        tp: &TopicPartition,
        timestamp_ms: i64,
    ) -> Result<(), ClientError> {
        self.core.seek(tp, SeekTo::Timestamp(timestamp_ms))
    }

    /// The next offset `poll` will return for `tp`, resolving a pending seek (earliest, latest,
    /// timestamp) with the broker first; waits at most `timeout_ms`.
    pub fn position(&mut self, tp: &TopicPartition, timeout_ms: u64) -> Result<i64, ClientError> {
        if !self.core.assignment().contains(tp) {
            return Err(ClientError::NotAssigned(tp.clone()));
        }
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            if let Some(p) = self.core.position(tp) {
                return Ok(p);
            }
            if let Some(e) = self.core.take_error() {
                return Err(e);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    what: format!("position of {tp}"),
                    timeout_ms,
                });
            }
            self.step(deadline - now)?;
        }
    }

    /// The last fetched high watermark of `tp` (-1 before the first fetch).
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.core.high_watermark(tp)
    }

    /// Waits up to `timeout_ms` for records (long poll). An empty result means none arrived in
    /// time; an error reported by the core (corrupt batch, non-retriable broker error) is returned
    /// once.
    pub fn poll(&mut self, timeout_ms: u64) -> Result<Vec<ConsumerRecord>, ClientError> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        if self.group.is_some() {
            // Lets the member notice a `max_poll_interval_ms` that passed since the last poll
            // (it leaves and loses its partitions) before this poll counts as one and rejoins.
            self.step(Duration::ZERO)?;
        }
        if let Some(g) = self.group.as_mut() {
            g.core.polled(super::now_ms());
        }
        self.apply_events()?;
        loop {
            if let Some(e) = self.core.take_error() {
                return Err(e);
            }
            let revoking = self.group.as_ref().is_some_and(|g| g.core.is_revoking());
            if self.core.has_records() && !revoking {
                let records = self.core.take_records(self.max_poll_records);
                if let Some(g) = self.group.as_mut() {
                    for r in &records {
                        g.core.processed(
                            &TopicPartition::new(r.topic.clone(), r.partition),
                            r.offset + 1,
                        );
                    }
                }
                return Ok(records);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            self.step(deadline - now)?;
        }
    }

    /// The core's counters.
    pub fn stats(&self) -> crate::client::consumer::ConsumerStats {
        self.core.stats()
    }
}
