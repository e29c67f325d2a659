//! Blocking consumer: `poll` drives the [`ConsumerCore`] on the caller's thread until records
//! arrive, an error is reported, or the timeout passes.
//!
//! With [`Consumer::subscribe`] the consumer joins `group_id` and the same calls also drive the
//! [`GroupCore`]: rebalance callbacks run inside `poll` (and `commit_sync`, `close`) on the
//! caller's thread. Kafka's at-least-once model: the records a `poll` returns count as processed
//! at the next `poll`, commit or close, which commit the positions after them.
//!
//! As in Kafka's Java client, a background heartbeat thread (started by `subscribe`) keeps the
//! membership alive while the application processes between two polls: liveness is
//! `session_timeout_ms`, progress is `max_poll_interval_ms`. It runs the member's background
//! duty only ([`GroupCore::background_actions`]: heartbeats, and LeaveGroup once
//! `max_poll_interval_ms` passes without a poll), never a callback, commit or rebalance, and
//! only while no call of the application is under way ([`super::turns`]).

use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::consumer::{ConsumerConfig, ConsumerCore, SeekTo};
use crate::client::group::both::{Away, Both};
use crate::client::group::listener::EventSink;
use crate::client::group::{CommitKind, GroupCore, RebalanceListener};
use crate::client::{ClientError, ConsumerRecord, TopicPartition};

use super::net::{BlockingNet, Event};
use super::turns::{Turns, AWAY_WAIT_MAX_MS};

struct Membership {
    core: GroupCore,
    listener: Box<dyn RebalanceListener + Send>,
    sink: EventSink,
}

/// Everything the application's calls and the heartbeat thread take turns at.
struct State {
    core: ConsumerCore,
    net: BlockingNet,
    group: Option<Membership>,
}

pub struct Consumer {
    turns: Arc<Turns<State>>,
    /// Wakes the heartbeat thread out of its network wait when the application wants its turn.
    wake: SyncSender<Event>,
    heartbeat: Option<JoinHandle<()>>,
    bootstrap: Vec<String>,
    /// Records returned per `poll` at most (Kafka `max.poll.records`).
    pub max_poll_records: usize,
}

impl State {
    /// One network round for both cores, then the group's events applied.
    fn step(&mut self, max_wait: Duration) -> Result<(), ClientError> {
        let mut both = Both {
            consumer: &mut self.core,
            group: self.group.as_mut().map(|g| &mut g.core),
        };
        self.net.step(&mut both, max_wait);
        self.apply_events()
    }

    /// One network round of the member's background duty (the heartbeat thread's step).
    fn step_away(&mut self) {
        let Some(g) = self.group.as_mut() else {
            return;
        };
        let mut away = Away {
            consumer: &mut self.core,
            group: &mut g.core,
        };
        self.net
            .step(&mut away, Duration::from_millis(AWAY_WAIT_MAX_MS));
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
}

impl Consumer {
    pub fn new(bootstrap: &[&str], config: ConsumerConfig) -> Result<Self, ClientError> {
        let net = BlockingNet::new(config.frame_limits, config.request_timeout_ms);
        let wake = net.waker();
        let bootstrap: Vec<String> = bootstrap.iter().map(|s| (*s).to_owned()).collect();
        let core = ConsumerCore::new(config, bootstrap.clone())?;
        Ok(Self {
            turns: Turns::new(State {
                core,
                net,
                group: None,
            }),
            wake,
            heartbeat: None,
            bootstrap,
            max_poll_records: 500,
        })
    }

    /// The application's turn at the state (the heartbeat thread waits meanwhile).
    fn state(&self) -> super::turns::Turn<'_, State> {
        let wake = &self.wake;
        let thread = self.heartbeat.is_some();
        self.turns.enter(|| {
            // Full: the heartbeat thread has events to read anyway, so its wait ends at once.
            // Without the thread nobody waits, and a wake-up would only end our own next wait.
            if thread {
                let _ = wake.try_send(Event::Wake);
            }
        })
    }

    /// Joins `config.group_id` subscribed to `topics`; partitions come and go through `listener`
    /// during `poll`. Replaces any manual assignment. Starts the heartbeat thread.
    pub fn subscribe(
        &mut self,
        topics: &[&str],
        listener: impl RebalanceListener + Send + 'static,
    ) -> Result<(), ClientError> {
        let topics = topics.iter().map(|t| (*t).to_owned()).collect();
        {
            let mut s = self.state();
            let core = GroupCore::new(
                s.core.config().clone(),
                self.bootstrap.clone(),
                topics,
                super::now_ms(),
            )?;
            s.core.assign(Vec::new());
            s.group = Some(Membership {
                core,
                listener: Box::new(listener),
                sink: EventSink::default(),
            });
        }
        if self.heartbeat.is_none() {
            let thread = self
                .turns
                .spawn("spool-heartbeat", State::step_away)
                .map_err(|e| ClientError::Connection(format!("heartbeat thread: {e}")))?;
            self.heartbeat = Some(thread);
        }
        Ok(())
    }

    /// The group generation (-1 outside a group or between generations).
    pub fn generation(&self) -> i32 {
        self.state()
            .group
            .as_ref()
            .map_or(-1, |g| g.core.generation())
    }

    /// The member id the coordinator gave this consumer ("" before it joined).
    pub fn member_id(&self) -> String {
        self.state()
            .group
            .as_ref()
            .map_or(String::new(), |g| g.core.member_id().to_owned())
    }

    /// Commits the processed positions and waits for the answer (retrying retriable errors up
    /// to `request_timeout_ms`). `Ok` at once when nothing is new.
    pub fn commit_sync(&mut self) -> Result<(), ClientError> {
        self.state().commit_and_wait(CommitKind::Sync)
    }

    /// Queues a commit of the processed positions; never retried. The outcome reaches the
    /// listener's `on_commit` during a later `poll`.
    pub fn commit_async(&mut self) -> Result<(), ClientError> {
        let mut s = self.state();
        let g = s
            .group
            .as_mut()
            .ok_or(ClientError::InvalidConfig("commit needs subscribe".into()))?;
        let _ = g.core.commit(CommitKind::Async, super::now_ms());
        Ok(())
    }

    /// Leaves the group: commits the processed positions (with `auto_commit`), revokes every
    /// partition through the listener, and sends LeaveGroup unless the member is static; at most
    /// `close_timeout_ms`.
    pub fn close(self) -> Result<(), ClientError> {
        let mut turn = self.state();
        let s = &mut *turn;
        let Some(g) = s.group.as_mut() else {
            return Ok(());
        };
        let timeout_ms = s.core.config().close_timeout_ms;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        g.core.close(super::now_ms());
        loop {
            s.step(Duration::from_millis(100))?;
            if s.group.as_ref().is_none_or(|g| g.core.is_closed()) {
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
        self.state().core.assign(partitions);
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.state().core.assignment()
    }

    pub fn seek(&mut self, tp: &TopicPartition, to: SeekTo) -> Result<(), ClientError> {
        self.state().core.seek(tp, to)
    }

    /// Stops fetching `tp` until `resume` (records already fetched are still returned).
    pub fn pause(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.state().core.pause(tp)
    }

    pub fn resume(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.state().core.resume(tp)
    }

    pub fn seek_to_beginning(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.seek(tp, SeekTo::Earliest)
    }

    pub fn seek_to_end(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.seek(tp, SeekTo::Latest)
    }

    pub fn seek_to_timestamp(
        &mut self,
        tp: &TopicPartition,
        timestamp_ms: i64,
    ) -> Result<(), ClientError> {
        self.seek(tp, SeekTo::Timestamp(timestamp_ms))
    }

    /// The next offset `poll` will return for `tp`, resolving a pending seek (earliest, latest,
    /// timestamp) with the broker first; waits at most `timeout_ms`.
    pub fn position(&mut self, tp: &TopicPartition, timeout_ms: u64) -> Result<i64, ClientError> {
        let mut s = self.state();
        if !s.core.assignment().contains(tp) {
            return Err(ClientError::NotAssigned(tp.clone()));
        }
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            if let Some(p) = s.core.position(tp) {
                return Ok(p);
            }
            if let Some(e) = s.core.take_error() {
                return Err(e);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    what: format!("position of {tp}"),
                    timeout_ms,
                });
            }
            s.step(deadline - now)?;
        }
    }

    /// The last fetched high watermark of `tp` (-1 before the first fetch).
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.state().core.high_watermark(tp)
    }

    /// Waits up to `timeout_ms` for records (long poll). An empty result means none arrived in
    /// time; an error reported by the core (corrupt batch, non-retriable broker error) is returned
    /// once.
    pub fn poll(&mut self, timeout_ms: u64) -> Result<Vec<ConsumerRecord>, ClientError> {
        let max_poll_records = self.max_poll_records;
        let mut s = self.state();
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        if s.group.is_some() {
            // What the heartbeat thread saw first (a loss after max_poll_interval_ms), then a
            // look of our own, before this poll counts as one and rejoins.
            s.apply_events()?;
            s.step(Duration::ZERO)?;
        }
        if let Some(g) = s.group.as_mut() {
            g.core.polled(super::now_ms());
        }
        s.apply_events()?;
        loop {
            if let Some(e) = s.core.take_error() {
                return Err(e);
            }
            let revoking = s.group.as_ref().is_some_and(|g| g.core.is_revoking());
            if s.core.has_records() && !revoking {
                let records = s.core.take_records(max_poll_records);
                if let Some(g) = s.group.as_mut() {
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
            s.step(deadline - now)?;
        }
    }

    /// The core's counters.
    pub fn stats(&self) -> crate::client::consumer::ConsumerStats {
        self.state().core.stats()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.turns.stop();
        let _ = self.wake.try_send(Event::Wake);
        if let Some(thread) = self.heartbeat.take() {
            let _ = thread.join();
        }
    }
}
