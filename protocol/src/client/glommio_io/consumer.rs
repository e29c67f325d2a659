//! Async consumer on glommio: `poll(..).await` drives the [`ConsumerCore`] in the calling task.

use std::time::{Duration, Instant};

use crate::client::consumer::{ConsumerConfig, ConsumerCore, SeekTo};
use crate::client::{ClientError, ConsumerRecord, TopicPartition};

use super::net::AsyncNet;

pub struct Consumer {
    core: ConsumerCore,
    net: AsyncNet,
    /// Records returned per `poll` at most (Kafka `max.poll.records`).
    pub max_poll_records: usize,
}

impl Consumer {
    /// Must be called inside a glommio executor.
    pub fn new(bootstrap: &[&str], config: ConsumerConfig) -> Result<Self, ClientError> {
        let net = AsyncNet::new(config.frame_limits, config.request_timeout_ms);
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
            self.net.step(&mut self.core, deadline - now).await;
        }
    }

    /// Waits up to `timeout_ms` for records (long poll).
    pub async fn poll(&mut self, timeout_ms: u64) -> Result<Vec<ConsumerRecord>, ClientError> {
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
            self.net.step(&mut self.core, deadline - now).await;
        }
    }
}
