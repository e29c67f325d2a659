//! Async consumer on glommio: `poll(..).await` drives the [`ConsumerCore`] in the calling task.
//!
//! [`Consumer::subscribe`] joins a consumer group as the blocking consumer does (same
//! [`GroupCore`], same listener, same at-least-once model); the callbacks run inside
//! `poll(..).await`, `commit_sync(..).await` and `close(..).await`. A heartbeat task on the same
//! executor (started by `subscribe`, [`super::heartbeat`]) runs the member's background duty
//! while the application is away from those calls, so liveness is `session_timeout_ms` and
//! progress is `max_poll_interval_ms`, as with Kafka's heartbeat thread.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::client::consumer::{ConsumerConfig, ConsumerCore, SeekTo};
use crate::client::group::listener::EventSink;
use crate::client::group::{CommitKind, GroupCore, RebalanceListener};
use crate::client::{ClientError, ConsumerRecord, TopicPartition};

use super::heartbeat::{step, Cores, Membership, Shared};
use super::net::{now_ms, AsyncNet};

pub struct Consumer {
    shared: Rc<Shared>,
    heartbeat: Option<glommio::Task<()>>,
    bootstrap: Vec<String>,
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
            shared: Shared::new(Cores { core, group: None }, net),
            heartbeat: None,
            bootstrap,
            max_poll_records: 500,
        })
    }

    /// Joins `config.group_id` subscribed to `topics` (see the blocking `Consumer::subscribe`).
    /// Starts the heartbeat task.
    pub fn subscribe(
        &mut self,
        topics: &[&str],
        listener: impl RebalanceListener + 'static,
    ) -> Result<(), ClientError> {
        let topics = topics.iter().map(|t| (*t).to_owned()).collect();
        {
            let mut c = self.shared.cores.borrow_mut();
            let core = GroupCore::new(
                c.core.config().clone(),
                self.bootstrap.clone(),
                topics,
                now_ms(),
            )?;
            c.core.assign(Vec::new());
            c.group = Some(Membership {
                core,
                listener: Box::new(listener),
                sink: EventSink::default(),
            });
        }
        if self.heartbeat.is_none() {
            self.heartbeat = Some(self.shared.spawn_heartbeat());
        }
        Ok(())
    }

    /// The group generation (-1 outside a group or between generations).
    pub fn generation(&self) -> i32 {
        self.shared
            .cores
            .borrow()
            .group
            .as_ref()
            .map_or(-1, |g| g.core.generation())
    }

    /// One network round for both cores, then the group's events applied.
    async fn step(&self, net: &mut AsyncNet, max_wait: Duration) -> Result<(), ClientError> {
        step(&self.shared.cores, net, false, max_wait).await;
        self.shared.cores.borrow_mut().apply_events()
    }

    /// Commits the processed positions and waits for the answer.
    pub async fn commit_sync(&mut self) -> Result<(), ClientError> {
        let id = {
            let mut c = self.shared.cores.borrow_mut();
            let g = c
                .group
                .as_mut()
                .ok_or(ClientError::InvalidConfig("commit needs subscribe".into()))?;
            g.core.commit(CommitKind::Sync, now_ms())
        };
        let Some(id) = id else {
            return Ok(());
        };
        let mut net = self.shared.take_net().await;
        loop {
            let result = self
                .shared
                .cores
                .borrow_mut()
                .group
                .as_mut()
                .and_then(|g| g.sink.commit_results.remove(&id));
            if let Some(r) = result {
                return r;
            }
            self.step(&mut net, Duration::from_millis(1000)).await?;
        }
    }

    /// Queues a commit of the processed positions; never retried.
    pub fn commit_async(&mut self) -> Result<(), ClientError> {
        let mut c = self.shared.cores.borrow_mut();
        let g = c
            .group
            .as_mut()
            .ok_or(ClientError::InvalidConfig("commit needs subscribe".into()))?;
        let _ = g.core.commit(CommitKind::Async, now_ms());
        Ok(())
    }

    /// Commits, revokes and leaves the group (LeaveGroup unless static), at most
    /// `close_timeout_ms`.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if let Some(task) = self.heartbeat.take() {
            self.shared.stop();
            // Ends at its next look, the connections back in their slot.
            task.await;
        }
        let timeout_ms = {
            let mut c = self.shared.cores.borrow_mut();
            let timeout_ms = c.core.config().close_timeout_ms;
            let Some(g) = c.group.as_mut() else {
                return Ok(());
            };
            g.core.close(now_ms());
            timeout_ms
        };
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let mut net = self.shared.take_net().await;
        loop {
            self.step(&mut net, Duration::from_millis(100)).await?;
            let closed = self
                .shared
                .cores
                .borrow()
                .group
                .as_ref()
                .is_none_or(|g| g.core.is_closed());
            if closed {
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
        self.shared.cores.borrow_mut().core.assign(partitions);
    }

    pub fn seek(&mut self, tp: &TopicPartition, to: SeekTo) -> Result<(), ClientError> {
        self.shared.cores.borrow_mut().core.seek(tp, to)
    }

    /// Stops fetching `tp` until `resume` (records already fetched are still returned).
    pub fn pause(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.shared.cores.borrow_mut().core.pause(tp)
    }

    pub fn resume(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.shared.cores.borrow_mut().core.resume(tp)
    }

    /// The next offset `poll` will return for `tp`, resolving a pending seek first.
    pub async fn position(
        &mut self,
        tp: &TopicPartition,
        timeout_ms: u64,
    ) -> Result<i64, ClientError> {
        if !self.shared.cores.borrow().core.assignment().contains(tp) {
            return Err(ClientError::NotAssigned(tp.clone()));
        }
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let mut net = self.shared.take_net().await;
        loop {
            {
                let mut c = self.shared.cores.borrow_mut();
                if let Some(p) = c.core.position(tp) {
                    return Ok(p);
                }
                if let Some(e) = c.core.take_error() {
                    return Err(e);
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    what: format!("position of {tp}"),
                    timeout_ms,
                });
            }
            self.step(&mut net, deadline - now).await?;
        }
    }

    /// Records to return now, if any (none while a revocation's commit is under way, so it
    /// covers everything the application was given).
    fn take_ready(&self) -> Result<Option<Vec<ConsumerRecord>>, ClientError> {
        let mut c = self.shared.cores.borrow_mut();
        if let Some(e) = c.core.take_error() {
            return Err(e);
        }
        let revoking = c.group.as_ref().is_some_and(|g| g.core.is_revoking());
        if !c.core.has_records() || revoking {
            return Ok(None);
        }
        let records = c.core.take_records(self.max_poll_records);
        if let Some(g) = c.group.as_mut() {
            for r in &records {
                let tp = TopicPartition::new(r.topic.clone(), r.partition);
                g.core.processed(&tp, r.offset + 1);
            }
        }
        Ok(Some(records))
    }

    /// Waits up to `timeout_ms` for records (long poll).
    pub async fn poll(&mut self, timeout_ms: u64) -> Result<Vec<ConsumerRecord>, ClientError> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let mut net = self.shared.take_net().await;
        let grouped = self.shared.cores.borrow().group.is_some();
        if grouped {
            // What the heartbeat task saw first (a loss after max_poll_interval_ms), then a
            // look of our own, before this poll counts as one and rejoins.
            self.shared.cores.borrow_mut().apply_events()?;
            self.step(&mut net, Duration::ZERO).await?;
        }
        {
            let mut c = self.shared.cores.borrow_mut();
            if let Some(g) = c.group.as_mut() {
                g.core.polled(now_ms());
            }
            c.apply_events()?;
        }
        loop {
            if let Some(records) = self.take_ready()? {
                return Ok(records);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            self.step(&mut net, deadline - now).await?;
        }
    }
}
