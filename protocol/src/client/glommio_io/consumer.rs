//! Async consumer on glommio: `poll(..).await` drives the [`ConsumerCore`] in the calling task.
//!
//! [`Consumer::subscribe`] joins a consumer group as the blocking consumer does (same
//! [`GroupCore`], same listener, same at-least-once model); the callbacks run inside
//! `poll(..).await`, `commit_sync(..).await` and `close(..).await`.

use std::time::{Duration, Instant};

use crate::client::consumer::{ConsumerConfig, ConsumerCore, SeekTo};
use crate::client::group::both::Both;
use crate::client::group::listener::EventSink;
use crate::client::group::{CommitKind, GroupCore, RebalanceListener};
use crate::client::{ClientError, ConsumerRecord, TopicPartition};

use super::net::{now_ms, AsyncNet};

struct Membership {
    core: GroupCore,
    listener: Box<dyn RebalanceListener>,
    sink: EventSink,
}

pub struct Consumer {
    core: ConsumerCore,
    net: AsyncNet,
    bootstrap: Vec<String>,
    group: Option<Membership>,
    /// Records returned per `poll` at most (Kafka `max.poll.records`).
    pub max_poll_records: usize,
}

impl Consumer {
    /// Must be called inside a glommio executor.
    pub fn new(bootstrap: &[&str], config: ConsumerConfig) -> Result<Self, ClientError> {
        let net = AsyncNet::new(config.frame_limits, config.request_timeout_ms);
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

    /// Joins `config.group_id` subscribed to `topics` (see the blocking `Consumer::subscribe`).
    pub fn subscribe(
        &mut self,
        topics: &[&str],
        listener: impl RebalanceListener + 'static,
    ) -> Result<(), ClientError> {
        let topics = topics.iter().map(|t| (*t).to_owned()).collect();
        let core = GroupCore::new(
            self.core.config().clone(),
            self.bootstrap.clone(),
            topics,
            now_ms(),
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

    async fn step(&mut self, max_wait: Duration) -> Result<(), ClientError> {
        let mut both = Both {
            consumer: &mut self.core,
            group: self.group.as_mut().map(|g| &mut g.core),
        };
        self.net.step(&mut both, max_wait).await;
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

    /// Commits the processed positions and waits for the answer.
    pub async fn commit_sync(&mut self) -> Result<(), ClientError> {
        let g = self
            .group
            .as_mut()
            .ok_or(ClientError::InvalidConfig("commit needs subscribe".into()))?;
        let Some(id) = g.core.commit(CommitKind::Sync, now_ms()) else {
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
            self.step(Duration::from_millis(1000)).await?;
        }
    }

    /// Queues a commit of the processed positions; never retried.
    pub fn commit_async(&mut self) -> Result<(), ClientError> {
        let g = self
            .group
            .as_mut()
            .ok_or(ClientError::InvalidConfig("commit needs subscribe".into()))?;
        let _ = g.core.commit(CommitKind::Async, now_ms());
        Ok(())
    }

    /// Commits, revokes and leaves the group (LeaveGroup unless static), at most
    /// `close_timeout_ms`.
    pub async fn close(mut self) -> Result<(), ClientError> {
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        let timeout_ms = self.core.config().close_timeout_ms;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        g.core.close(now_ms());
        loop {
            self.step(Duration::from_millis(100)).await?;
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

    /// The next offset `poll` will return for `tp`, resolving a pending seek first.
    pub async fn position(
        &mut self,
        tp: &TopicPartition,
        timeout_ms: u64,
    ) -> Result<i64, ClientError> {
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
            self.step(deadline - now).await?;
        }
    }

    /// Waits up to `timeout_ms` for records (long poll).
    pub async fn poll(&mut self, timeout_ms: u64) -> Result<Vec<ConsumerRecord>, ClientError> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        if self.group.is_some() {
            // Lets the member notice a `max_poll_interval_ms` that passed since the last poll
            // (it leaves and loses its partitions) before this poll counts as one and rejoins.
            self.step(Duration::ZERO).await?;
        }
        if let Some(g) = self.group.as_mut() {
            g.core.polled(now_ms());
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
                        let tp = TopicPartition::new(r.topic.clone(), r.partition);
                        g.core.processed(&tp, r.offset + 1);
                    }
                }
                return Ok(records);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            self.step(deadline - now).await?;
        }
    }
}
