//! Blocking consumer: `poll` drives the [`ConsumerCore`] on the caller's thread until records
//! arrive, an error is reported, or the timeout passes.

use std::time::{Duration, Instant};

use crate::client::consumer::{ConsumerConfig, ConsumerCore, SeekTo};
use crate::client::{ClientError, ConsumerRecord, TopicPartition};

use super::net::BlockingNet;

pub struct Consumer {
    core: ConsumerCore,
    net: BlockingNet,
    /// Records returned per `poll` at most (Kafka `max.poll.records`).
    pub max_poll_records: usize,
}

impl Consumer {
    pub fn new(bootstrap: &[&str], config: ConsumerConfig) -> Result<Self, ClientError> {
        let net = BlockingNet::new(config.frame_limits, config.request_timeout_ms);
        let core = ConsumerCore::new(config, bootstrap.iter().map(|s| (*s).to_owned()).collect())?;
        Ok(Self {
            core,
            net,
            max_poll_records: 500,
        })
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
            self.net.step(&mut self.core, deadline - now);
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
        loop {
            if let Some(e) = self.core.take_error() {
                return Err(e);
            }
            if self.core.has_records() {
                return Ok(self.core.take_records(self.max_poll_records));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            self.net.step(&mut self.core, deadline - now);
        }
    }

    /// The core's counters.
    pub fn stats(&self) -> crate::client::consumer::ConsumerStats {
        self.core.stats()
    }
}
