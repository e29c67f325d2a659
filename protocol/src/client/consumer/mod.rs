//! The consumer's sans-IO core: assigned partitions, positions, long-poll fetches.
//!
//! Each assigned partition has a *fetch offset* (next offset to ask the leader for) and a
//! *position* (next offset to hand to the application); they differ by the records fetched but not
//! yet taken. [`ConsumerCore::poll_actions`] sends one Fetch per leader at a time (the broker holds
//! it up to `fetch_max_wait_ms` until `fetch_min_bytes` are there: the long poll) while the
//! fetched-but-untaken bytes stay under `max_buffered_bytes`. Seeking to earliest, latest or a
//! timestamp asks the leader with ListOffsets first; every seek bumps a per-partition generation so
//! a response to a request sent before the seek is dropped, never applied.
//!
//! Batches are validated (length, magic, CRC-32C) and decoded by `spool_storage`; a corrupt batch
//! surfaces as [`ClientError::Corrupt`] with its partition and offset. Under `read_committed`,
//! records of aborted transactions are dropped using the fetch response's aborted-transaction list
//! and the abort markers, as Kafka's consumer does; control batches are never returned.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use tracing::warn;

mod config;
mod fetched;

pub use config::{ConsumerConfig, OffsetReset, SeekTo};
pub use fetched::{decode_fetched, Decoded};

use crate::client::metadata::MetadataCache;
use crate::client::net::{backoff_ms, Addr, ClientCore, InFlight, NetAction};
use crate::client::{ClientError, ConsumerRecord, TopicPartition};
use crate::codec::{self, encode_request, Response};
use crate::payload;
use crate::wire::{
    FetchPartitionDataT, FetchPartitionT, FetchRequestT, FetchTopicT, IsolationLevel,
    ListOffsetsPartitionT, ListOffsetsRequestT, ListOffsetsTopicT, RequestBodyT, ResponseBodyT,
};
use crate::ErrorCode;

#[derive(Debug, Default)]
struct PartState {
    fetch_offset: Option<i64>,
    position: Option<i64>,
    lookup: Option<SeekTo>,
    lookup_in_flight: bool,
    fetch_in_flight: bool,
    generation: u64,
    high_watermark: i64,
    log_start_offset: i64,
    retry_at_ms: u64,
    attempts: u32,
    buffered_records: usize,
    /// Paused by the application: no fetches (positions and buffered records stay).
    paused: bool,
}

#[derive(Debug)]
enum Pending {
    Metadata,
    Fetch(Vec<(TopicPartition, u64)>),
    ListOffsets(Vec<(TopicPartition, u64, SeekTo)>),
}

/// Counters, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    pub fetch_requests: u64,
    pub list_offsets_requests: u64,
    pub metadata_requests: u64,
    pub records_fetched: u64,
}

#[derive(Debug)]
pub struct ConsumerCore {
    config: ConsumerConfig,
    metadata: MetadataCache,
    parts: BTreeMap<TopicPartition, PartState>,
    buffer: VecDeque<ConsumerRecord>,
    buffered_bytes: usize,
    inflight: InFlight<Pending>,
    errors: VecDeque<ClientError>,
    stats: ConsumerStats,
}

fn record_bytes(r: &ConsumerRecord) -> usize {
    r.key.as_ref().map_or(0, Bytes::len) + r.value.as_ref().map_or(0, Bytes::len) + 64
}

impl ConsumerCore {
    pub fn new(config: ConsumerConfig, bootstrap: Vec<Addr>) -> Result<Self, ClientError> {
        config.validate()?;
        if bootstrap.is_empty() {
            return Err(ClientError::InvalidConfig("bootstrap list is empty".into()));
        }
        Ok(Self {
            metadata: MetadataCache::new(
                bootstrap,
                config.retry_backoff_ms,
                config.metadata_max_age_ms,
            ),
            config,
            parts: BTreeMap::new(),
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            inflight: InFlight::default(),
            errors: VecDeque::new(),
            stats: ConsumerStats::default(),
        })
    }

    pub fn stats(&self) -> ConsumerStats {
        self.stats
    }

    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// Replaces the assignment. Partitions kept keep their positions; new ones start from
    /// `auto_offset_reset`.
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        let wanted: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        self.parts.retain(|tp, _| wanted.contains(tp));
        let before = self.buffer.len();
        self.buffer
            .retain(|r| wanted.contains(&TopicPartition::new(r.topic.clone(), r.partition)));
        if self.buffer.len() != before {
            self.buffered_bytes = self.buffer.iter().map(record_bytes).sum();
        }
        for tp in wanted {
            self.metadata.want_topic(&tp.topic);
            let reset = self.config.auto_offset_reset;
            self.parts.entry(tp).or_insert_with(|| PartState {
                lookup: match reset {
                    OffsetReset::Earliest => Some(SeekTo::Earliest),
                    OffsetReset::Latest => Some(SeekTo::Latest),
                    OffsetReset::None => None,
                },
                ..PartState::default()
            });
        }
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.parts.keys().cloned().collect()
    }

    /// Stops fetching `tp` until [`Self::resume`] (Kafka's `pause`); records already fetched are
    /// still returned.
    pub fn pause(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        let st = self
            .parts
            .get_mut(tp)
            .ok_or_else(|| ClientError::NotAssigned(tp.clone()))?;
        st.paused = true;
        Ok(())
    }

    pub fn resume(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        let st = self
            .parts
            .get_mut(tp)
            .ok_or_else(|| ClientError::NotAssigned(tp.clone()))?;
        st.paused = false;
        Ok(())
    }

    pub fn paused(&self) -> Vec<TopicPartition> {
        self.parts
            .iter()
            .filter(|(_, s)| s.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Moves a partition's position. Records already fetched for it are dropped.
    pub fn seek(&mut self, tp: &TopicPartition, to: SeekTo) -> Result<(), ClientError> {
        let Some(st) = self.parts.get_mut(tp) else {
            return Err(ClientError::NotAssigned(tp.clone()));
        };
        st.generation += 1;
        st.retry_at_ms = 0;
        st.attempts = 0;
        match to {
            SeekTo::Offset(o) => {
                st.fetch_offset = Some(o);
                st.position = Some(o);
                st.lookup = None;
            }
            other => {
                st.fetch_offset = None;
                st.position = None;
                st.lookup = Some(other);
            }
        }
        st.buffered_records = 0;
        let before = self.buffer.len();
        self.buffer
            .retain(|r| !(r.topic == tp.topic && r.partition == tp.partition));
        if self.buffer.len() != before {
            self.buffered_bytes = self.buffer.iter().map(record_bytes).sum();
        }
        Ok(())
    }

    /// The next offset the application will receive, once known (a pending seek to earliest,
    /// latest or a timestamp has no position until the broker answers).
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        self.parts.get(tp).and_then(|s| s.position)
    }

    /// The high watermark from the last fetch (-1 until one returned).
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.parts.get(tp).map(|s| s.high_watermark)
    }

    /// Whether records are ready to take.
    pub fn has_records(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// Whether an error is waiting for [`Self::take_error`].
    pub fn has_error(&self) -> bool {
        !self.errors.is_empty()
    }

    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Takes up to `max_records` fetched records, advancing positions.
    pub fn take_records(&mut self, max_records: usize) -> Vec<ConsumerRecord> {
        let n = max_records.min(self.buffer.len());
        let out: Vec<ConsumerRecord> = self.buffer.drain(..n).collect();
        // The buffer holds runs of one partition (a fetch answer's partition at a time): the
        // positions are advanced once per run, not looked up per record.
        let mut start = 0;
        while start < out.len() {
            let first = &out[start];
            let len = out[start..]
                .iter()
                .take_while(|r| r.partition == first.partition && r.topic == first.topic)
                .count();
            let run = &out[start..start + len];
            let bytes: usize = run.iter().map(record_bytes).sum();
            self.buffered_bytes = self.buffered_bytes.saturating_sub(bytes);
            let tp = TopicPartition::new(first.topic.clone(), first.partition);
            if let Some(st) = self.parts.get_mut(&tp) {
                st.position = Some(run[len - 1].offset + 1);
                st.buffered_records = st.buffered_records.saturating_sub(len);
                if st.buffered_records == 0 {
                    // Skipped offsets (control batches, aborted records, compaction gaps) count as
                    // consumed once everything before them was taken.
                    st.position = st.fetch_offset.or(st.position);
                }
            }
            start += len;
        }
        out
    }

    /// The oldest error not yet reported.
    pub fn take_error(&mut self) -> Option<ClientError> {
        self.errors.pop_front()
    }

    fn request(
        &mut self,
        addr: &str,
        body: RequestBodyT,
        pending: Pending,
        timeout_ms: u64,
        now_ms: u64,
    ) -> Option<NetAction> {
        let correlation_id = self.inflight.start(addr, now_ms + timeout_ms, pending);
        let header = codec::request(correlation_id, Some(&self.config.client_id), body);
        match encode_request(&header, Vec::new(), &self.config.frame_limits) {
            Ok(frame) => Some(NetAction::Send {
                addr: addr.to_owned(),
                frame,
                expects_response: true,
            }),
            Err(e) => {
                warn!(error = %e, "could not encode request");
                let _ = self.inflight.complete(addr, correlation_id);
                None
            }
        }
    }

    fn leaders_for<F: Fn(&PartState) -> bool>(
        &mut self,
        now_ms: u64,
        eligible: F,
    ) -> BTreeMap<Addr, Vec<TopicPartition>> {
        let mut by_leader: BTreeMap<Addr, Vec<TopicPartition>> = BTreeMap::new();
        let mut missing = false;
        for (tp, st) in &self.parts {
            if st.retry_at_ms > now_ms || !eligible(st) {
                continue;
            }
            match self.metadata.leader(&tp.topic, tp.partition) {
                Some((_, addr)) => by_leader.entry(addr).or_default().push(tp.clone()),
                None => missing = true,
            }
        }
        if missing {
            self.metadata.request_refresh();
        }
        by_leader
    }

    fn send_lookups(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        let groups = self.leaders_for(now_ms, |s| s.lookup.is_some() && !s.lookup_in_flight);
        for (addr, tps) in groups {
            let mut topics: BTreeMap<String, Vec<ListOffsetsPartitionT>> = BTreeMap::new();
            let mut ctx = Vec::new();
            for tp in tps {
                let Some(st) = self.parts.get_mut(&tp) else {
                    continue;
                };
                let Some(target) = st.lookup else { continue };
                st.lookup_in_flight = true;
                let mut p = ListOffsetsPartitionT::default();
                p.partition_index = tp.partition;
                p.timestamp = target.list_offsets_timestamp();
                topics.entry(tp.topic.clone()).or_default().push(p);
                ctx.push((tp, st.generation, target));
            }
            let mut body = ListOffsetsRequestT::default();
            body.isolation_level = self.config.isolation_level;
            body.topics = Some(
                topics
                    .into_iter()
                    .map(|(name, partitions)| ListOffsetsTopicT {
                        name,
                        partitions: Some(partitions),
                    })
                    .collect(),
            );
            self.stats.list_offsets_requests += 1;
            let timeout_ms = self.config.request_timeout_ms;
            let body = RequestBodyT::ListOffsetsRequest(Box::new(body));
            match self.request(
                &addr,
                body,
                Pending::ListOffsets(ctx.clone()),
                timeout_ms,
                now_ms,
            ) {
                Some(a) => out.push(a),
                None => self.clear_lookups(&ctx),
            }
        }
    }

    fn clear_lookups(&mut self, ctx: &[(TopicPartition, u64, SeekTo)]) {
        for (tp, _, _) in ctx {
            if let Some(st) = self.parts.get_mut(tp) {
                st.lookup_in_flight = false;
            }
        }
    }

    fn send_fetches(&mut self, now_ms: u64, out: &mut Vec<NetAction>) {
        if self.buffered_bytes >= self.config.max_buffered_bytes {
            return;
        }
        let groups = self.leaders_for(now_ms, |s| {
            s.fetch_offset.is_some() && !s.fetch_in_flight && s.lookup.is_none() && !s.paused
        });
        for (addr, tps) in groups {
            // One fetch per broker at a time, as Kafka's consumer does.
            if self
                .inflight
                .contexts_to(&addr)
                .any(|p| matches!(p, Pending::Fetch(_)))
            {
                continue;
            }
            let mut topics: BTreeMap<String, Vec<FetchPartitionT>> = BTreeMap::new();
            let mut ctx = Vec::new();
            for tp in tps {
                let Some(st) = self.parts.get_mut(&tp) else {
                    continue;
                };
                let Some(offset) = st.fetch_offset else {
                    continue;
                };
                st.fetch_in_flight = true;
                let mut p = FetchPartitionT::default();
                p.partition = tp.partition;
                p.fetch_offset = offset;
                p.partition_max_bytes = self.config.max_partition_fetch_bytes;
                topics.entry(tp.topic.clone()).or_default().push(p);
                ctx.push((tp, st.generation));
            }
            let mut body = FetchRequestT::default();
            body.replica_id = -1;
            body.max_wait_ms = i32::try_from(self.config.fetch_max_wait_ms).unwrap_or(i32::MAX);
            body.min_bytes = self.config.fetch_min_bytes;
            body.max_bytes = self.config.fetch_max_bytes;
            body.isolation_level = self.config.isolation_level;
            body.topics = Some(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| FetchTopicT {
                        topic,
                        partitions: Some(partitions),
                    })
                    .collect(),
            );
            self.stats.fetch_requests += 1;
            let timeout_ms = self.config.request_timeout_ms;
            let body = RequestBodyT::FetchRequest(Box::new(body));
            match self.request(&addr, body, Pending::Fetch(ctx.clone()), timeout_ms, now_ms) {
                Some(a) => out.push(a),
                None => {
                    for (tp, _) in ctx {
                        if let Some(st) = self.parts.get_mut(&tp) {
                            st.fetch_in_flight = false;
                        }
                    }
                }
            }
        }
    }

    fn partition_error(&mut self, tp: &TopicPartition, code: ErrorCode, now_ms: u64) {
        if code.invalidates_metadata() {
            self.metadata.request_refresh();
        }
        let Some(st) = self.parts.get_mut(tp) else {
            return;
        };
        st.attempts += 1;
        st.retry_at_ms = now_ms
            + backoff_ms(
                st.attempts,
                self.config.retry_backoff_ms,
                self.config.retry_backoff_max_ms,
            );
        if code == ErrorCode::OffsetOutOfRange {
            match self.config.auto_offset_reset {
                OffsetReset::Earliest => st.lookup = Some(SeekTo::Earliest),
                OffsetReset::Latest => st.lookup = Some(SeekTo::Latest),
                OffsetReset::None => {
                    st.fetch_offset = None;
                    let at = st.position.unwrap_or(-1);
                    self.errors.push_back(ClientError::broker(
                        code,
                        format!("fetch {tp} at offset {at}"),
                    ));
                }
            }
            st.retry_at_ms = 0;
        } else if !code.is_retriable() {
            self.errors
                .push_back(ClientError::broker(code, format!("fetch {tp}")));
        }
    }

    fn on_fetch(&mut self, ctx: Vec<(TopicPartition, u64)>, response: Response, now_ms: u64) {
        let frame_error = ErrorCode::from(response.header.error_code);
        let body = match response.header.body {
            ResponseBodyT::FetchResponse(b) => Some(b),
            _ => None,
        };
        for (tp, generation) in ctx {
            let Some(st) = self.parts.get_mut(&tp) else {
                continue;
            };
            st.fetch_in_flight = false;
            if st.generation != generation {
                continue; // Sought since: this data is for the old position.
            }
            let Some(body) = &body else {
                let code = if frame_error.is_ok() {
                    ErrorCode::UnknownServerError
                } else {
                    frame_error
                };
                self.partition_error(&tp, code, now_ms);
                continue;
            };
            let data = body
                .responses
                .iter()
                .flatten()
                .filter(|t| t.topic == tp.topic)
                .flat_map(|t| t.partitions.iter().flatten())
                .find(|p| p.partition_index == tp.partition);
            let Some(data) = data else { continue };
            let code = ErrorCode::from(data.error_code);
            if !code.is_ok() {
                self.partition_error(&tp, code, now_ms);
                continue;
            }
            let data = data.clone();
            self.accept_fetched(&tp, &data, &response.payload);
        }
    }

    /// Decodes one partition's fetched batches into the buffer.
    fn accept_fetched(
        &mut self,
        tp: &TopicPartition,
        data: &FetchPartitionDataT,
        payload_bytes: &Bytes,
    ) {
        let Some(st) = self.parts.get_mut(tp) else {
            return;
        };
        st.high_watermark = data.high_watermark;
        st.log_start_offset = data.log_start_offset;
        st.attempts = 0;
        let Some(fetch_offset) = st.fetch_offset else {
            return;
        };
        let Some(slice) = &data.records else { return };
        let bytes = match payload::slice(payload_bytes, slice) {
            Ok(b) => b,
            Err(e) => {
                self.errors
                    .push_back(ClientError::Corrupt(format!("{tp}: {e}")));
                return;
            }
        };
        let read_committed = self.config.isolation_level == IsolationLevel::ReadCommitted;
        let aborted: Vec<(i64, i64)> = data
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id, a.first_offset))
            .collect();
        let max_batch_bytes = self.config.frame_limits.max_frame_bytes;
        let Decoded {
            records: fetched,
            next_offset,
            error,
        } = decode_fetched(
            tp,
            &bytes,
            fetch_offset,
            &aborted,
            read_committed,
            max_batch_bytes,
        );
        if let Some(e) = error {
            self.errors.push_back(e);
        }
        let Some(st) = self.parts.get_mut(tp) else {
            return;
        };
        st.fetch_offset = Some(next_offset);
        st.buffered_records += fetched.len();
        if st.buffered_records == 0 {
            st.position = Some(next_offset);
        }
        self.stats.records_fetched += fetched.len() as u64;
        for r in fetched {
            self.buffered_bytes += record_bytes(&r);
            self.buffer.push_back(r);
        }
    }

    fn on_list_offsets(
        &mut self,
        ctx: Vec<(TopicPartition, u64, SeekTo)>,
        response: Response,
        now_ms: u64,
    ) {
        self.clear_lookups(&ctx);
        let frame_error = ErrorCode::from(response.header.error_code);
        let body = match response.header.body {
            ResponseBodyT::ListOffsetsResponse(b) => Some(b),
            _ => None,
        };
        for (tp, generation, target) in ctx {
            match self.parts.get(&tp) {
                Some(st) if st.generation == generation && st.lookup == Some(target) => {}
                _ => continue,
            }
            let answer = body.as_ref().and_then(|b| {
                b.topics
                    .iter()
                    .flatten()
                    .filter(|t| t.name == tp.topic)
                    .flat_map(|t| t.partitions.iter().flatten())
                    .find(|p| p.partition_index == tp.partition)
                    .cloned()
            });
            let Some(answer) = answer else {
                let code = if frame_error.is_ok() {
                    ErrorCode::UnknownServerError
                } else {
                    frame_error
                };
                self.lookup_error(&tp, code, now_ms);
                continue;
            };
            let code = ErrorCode::from(answer.error_code);
            if !code.is_ok() {
                self.lookup_error(&tp, code, now_ms);
                continue;
            }
            let Some(st) = self.parts.get_mut(&tp) else {
                continue;
            };
            if answer.offset < 0 {
                // No record at or after the timestamp: Kafka's consumer then reads from the end.
                st.lookup = Some(SeekTo::Latest);
                continue;
            }
            st.lookup = None;
            st.attempts = 0;
            st.fetch_offset = Some(answer.offset);
            st.position = Some(answer.offset);
        }
    }

    fn lookup_error(&mut self, tp: &TopicPartition, code: ErrorCode, now_ms: u64) {
        if code.invalidates_metadata() {
            self.metadata.request_refresh();
        }
        if !code.is_retriable() {
            self.errors
                .push_back(ClientError::broker(code, format!("list offsets {tp}")));
        }
        if let Some(st) = self.parts.get_mut(tp) {
            st.attempts += 1;
            st.retry_at_ms = now_ms
                + backoff_ms(
                    st.attempts,
                    self.config.retry_backoff_ms,
                    self.config.retry_backoff_max_ms,
                );
        }
    }
}

impl ClientCore for ConsumerCore {
    fn poll_actions(&mut self, now_ms: u64) -> Vec<NetAction> {
        let mut out = Vec::new();
        for addr in self.inflight.expired_addrs(now_ms) {
            warn!(%addr, "request timed out; closing the connection");
            out.push(NetAction::Close { addr: addr.clone() });
            self.on_disconnect(&addr, now_ms);
        }
        if self.metadata.refresh_due(now_ms) && !self.parts.is_empty() {
            if let Some(addr) = self.metadata.any_broker() {
                let req = self.metadata.begin_refresh(now_ms, false);
                self.stats.metadata_requests += 1;
                let timeout_ms = self.config.request_timeout_ms;
                let body = RequestBodyT::MetadataRequest(Box::new(req));
                match self.request(&addr, body, Pending::Metadata, timeout_ms, now_ms) {
                    Some(a) => out.push(a),
                    None => self.metadata.refresh_failed(),
                }
            }
        }
        self.send_lookups(now_ms, &mut out);
        self.send_fetches(now_ms, &mut out);
        out
    }

    fn on_response(&mut self, addr: &str, response: Response, now_ms: u64) {
        let Some(pending) = self.inflight.complete(addr, response.header.correlation_id) else {
            warn!(%addr, correlation_id = response.header.correlation_id, "response matches no request");
            return;
        };
        match pending {
            Pending::Metadata => match response.header.body {
                ResponseBodyT::MetadataResponse(m) => self.metadata.update(&m, now_ms),
                _ => self.metadata.refresh_failed(),
            },
            Pending::Fetch(ctx) => self.on_fetch(ctx, response, now_ms),
            Pending::ListOffsets(ctx) => self.on_list_offsets(ctx, response, now_ms),
        }
    }

    fn on_disconnect(&mut self, addr: &str, now_ms: u64) {
        let lost = self.inflight.drain_addr(addr);
        if !lost.is_empty() {
            self.metadata.request_refresh();
        }
        for p in lost {
            match p {
                Pending::Metadata => self.metadata.refresh_failed(),
                Pending::Fetch(ctx) => {
                    for (tp, _) in ctx {
                        if let Some(st) = self.parts.get_mut(&tp) {
                            st.fetch_in_flight = false;
                            st.attempts += 1;
                            st.retry_at_ms = now_ms
                                + backoff_ms(
                                    st.attempts,
                                    self.config.retry_backoff_ms,
                                    self.config.retry_backoff_max_ms,
                                );
                        }
                    }
                }
                Pending::ListOffsets(ctx) => {
                    self.clear_lookups(&ctx);
                    for (tp, _, _) in ctx {
                        if let Some(st) = self.parts.get_mut(&tp) {
                            st.attempts += 1;
                            st.retry_at_ms = now_ms
                                + backoff_ms(
                                    st.attempts,
                                    self.config.retry_backoff_ms,
                                    self.config.retry_backoff_max_ms,
                                );
                        }
                    }
                }
            }
        }
    }

    fn next_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        let retry = self
            .parts
            .values()
            .map(|s| s.retry_at_ms)
            .filter(|t| *t > now_ms)
            .min();
        let refresh = if self.parts.is_empty() {
            None
        } else {
            self.metadata.next_refresh_ms()
        };
        [retry, refresh, self.inflight.earliest_deadline_ms()]
            .into_iter()
            .flatten()
            .filter(|t| *t > now_ms)
            .min()
    }
}

#[cfg(test)]
mod tests;
