//! An in-process fake broker cluster that speaks spool's native frames, for client tests.
//!
//! It keeps just enough state to be a faithful counterpart: topics with partitions and leaders,
//! a log per partition (batches validated with `spool_storage`, offsets assigned in place),
//! producer-id sequence dedup, long-poll fetch, ListOffsets by earliest / latest / timestamp. Tests
//! inject faults (an error code for the next N requests to a partition, a dropped connection, a
//! malformed response frame) and close a produce gate to hold responses. It is not the broker:
//! single-threaded per connection, no replication, nothing on disk.
#![allow(dead_code, clippy::field_reassign_with_default)]

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use spool_protocol::codec::{self, decode_request, encode_response};
use spool_protocol::frame::{read_frame, FrameLimits};
use spool_protocol::payload::{self, PayloadBuilder};
use spool_protocol::wire::*;
use spool_protocol::{versions, ErrorCode};
use spool_storage::batch::{self as sbatch, BatchIter};
use spool_storage::records::{read_batch, Record};

#[derive(Debug, Clone)]
pub struct StoredBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub bytes: Bytes,
}

#[derive(Debug, Clone, Default)]
pub struct PartitionLog {
    pub leader: i32,
    pub batches: Vec<StoredBatch>,
    pub next_offset: i64,
    /// producer id → (last base sequence, its base offset).
    pub sequences: HashMap<i64, (i32, i64)>,
}

/// Answer the next `remaining` requests of `api` touching `topic`/`partition` with `error`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub api: ApiKey,
    pub topic: String,
    pub partition: i32,
    pub error: ErrorCode,
    pub remaining: u32,
}

#[derive(Debug, Default)]
pub struct State {
    pub brokers: Vec<(i32, String, u16)>,
    pub topics: BTreeMap<String, Vec<PartitionLog>>,
    pub faults: Vec<Fault>,
    pub produce_gate_closed: bool,
    pub produces_held: u64,
    pub produce_requests: u64,
    pub metadata_requests: u64,
    pub fetch_requests: u64,
    pub next_producer_id: i64,
    /// Append the next produce, then drop the connection without answering (a lost ack).
    pub drop_after_next_produce: bool,
    /// Send a malformed frame instead of the next response.
    pub garbage_next_response: bool,
    /// Drop the connection instead of answering the next fetch.
    pub drop_next_fetch: bool,
    /// Send responses larger than 200 KB in two writes, the last 100 KB after a pause: a
    /// client waiting for more of a frame than is still to come would never see its end.
    pub paced_large_responses: bool,
}

/// What [`State::paced_large_responses`] holds back, and for how long.
const PACED_TAIL_BYTES: usize = 100_000;
const PACED_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

struct Inner {
    state: Mutex<State>,
    changed: Condvar,
}

pub struct FakeCluster {
    inner: Arc<Inner>,
    pub addrs: Vec<String>,
}

impl FakeCluster {
    /// Starts `brokers` fake brokers (ids 0..n) on 127.0.0.1 ephemeral ports.
    pub fn start(brokers: usize) -> Self {
        // `RUST_LOG=spool_protocol=trace cargo test ...` shows what the clients did.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let inner = Arc::new(Inner {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let mut addrs = Vec::new();
        for id in 0..brokers as i32 {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let port = listener.local_addr().expect("addr").port();
            inner
                .state
                .lock()
                .unwrap()
                .brokers
                .push((id, "127.0.0.1".into(), port));
            addrs.push(format!("127.0.0.1:{port}"));
            let inner = inner.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { return };
                    let inner = inner.clone();
                    std::thread::spawn(move || serve(&inner, id, stream));
                }
            });
        }
        Self { inner, addrs }
    }

    pub fn bootstrap(&self) -> Vec<&str> {
        self.addrs.iter().map(String::as_str).collect()
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap()
    }

    /// Changes state and wakes anything waiting on it (held produces, long polls).
    pub fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state());
        self.inner.changed.notify_all();
    }

    pub fn create_topic(&self, name: &str, partitions: i32, leader: i32) {
        self.update(|s| {
            s.topics.insert(
                name.to_owned(),
                (0..partitions)
                    .map(|_| PartitionLog {
                        leader,
                        ..PartitionLog::default()
                    })
                    .collect(),
            );
        });
    }

    pub fn set_leader(&self, topic: &str, partition: i32, leader: i32) {
        self.update(|s| {
            if let Some(p) = s
                .topics
                .get_mut(topic)
                .and_then(|t| t.get_mut(partition as usize))
            {
                p.leader = leader;
            }
        });
    }

    pub fn inject(&self, fault: Fault) {
        self.update(|s| s.faults.push(fault));
    }

    /// Waits (on the state's condition variable) until `cond` holds; panics after 30 s so a
    /// broken test fails instead of hanging. Not a timing assertion: the bound is only a fuse.
    pub fn wait_until(&self, what: &str, cond: impl Fn(&State) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut s = self.state();
        while !cond(&s) {
            let now = Instant::now();
            assert!(now < deadline, "fake cluster: gave up waiting for {what}");
            s = self
                .inner
                .changed
                .wait_timeout(s, deadline - now)
                .unwrap()
                .0;
        }
    }

    /// Every record stored in a partition, with its absolute offset.
    pub fn records(&self, topic: &str, partition: i32) -> Vec<(i64, Record)> {
        let s = self.state();
        let mut out = Vec::new();
        for b in &s.topics[topic][partition as usize].batches {
            let (h, records) = read_batch(&b.bytes, 1 << 26).expect("stored batch decodes");
            for r in records {
                out.push((h.base_offset + i64::from(r.offset_delta), r));
            }
        }
        out
    }
}

fn take_fault(s: &mut State, api: ApiKey, topic: &str, partition: i32) -> Option<ErrorCode> {
    let f = s.faults.iter_mut().find(|f| {
        f.api == api && f.topic == topic && f.partition == partition && f.remaining > 0
    })?;
    f.remaining -= 1;
    Some(f.error)
}

fn serve(inner: &Inner, broker_id: i32, mut stream: TcpStream) {
    let limits = FrameLimits::default();
    let mut reader = stream.try_clone().expect("clone");
    loop {
        let raw = match read_frame(&mut reader, &limits) {
            Ok(Some(raw)) => raw,
            _ => return,
        };
        let Ok(request) = decode_request(&raw, &limits) else {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        };
        let correlation_id = request.header.correlation_id;
        let (body, payload, respond, drop_conn) = handle(inner, broker_id, request);
        if drop_conn {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        if !respond {
            continue;
        }
        let garbage = std::mem::take(&mut inner.state.lock().unwrap().garbage_next_response);
        if garbage {
            // A well-formed length prefix around a header that is not a flatbuffer.
            let frame =
                spool_protocol::frame::assemble(&[0xAB; 24], vec![], &limits).expect("frame");
            let _ = frame.write_to(&mut stream);
            continue;
        }
        let header = codec::response(correlation_id, 0, body);
        let frame = encode_response(&header, payload, &limits).expect("encode");
        let paced = inner.state.lock().unwrap().paced_large_responses;
        let written = if paced && frame.len() > 2 * PACED_TAIL_BYTES {
            let bytes = frame.to_bytes();
            let (head, tail) = bytes.split_at(bytes.len() - PACED_TAIL_BYTES);
            stream.write_all(head).and_then(|()| {
                std::thread::sleep(PACED_PAUSE);
                stream.write_all(tail)
            })
        } else {
            frame.write_to(&mut stream)
        };
        if written.and_then(|()| stream.flush()).is_err() {
            return;
        }
    }
}

type Handled = (ResponseBodyT, Vec<Bytes>, bool, bool);

/// The fake's API table: every native API, at the native rule's version 0.
fn all_apis() -> Vec<versions::ApiRange<ApiKey>> {
    ApiKey::ENUM_VALUES
        .iter()
        .map(|&api_key| versions::ApiRange {
            api_key,
            min_version: 0,
            max_version: 0,
        })
        .collect()
}

fn handle(inner: &Inner, broker_id: i32, request: spool_protocol::Request) -> Handled {
    let payload_bytes = request.payload.clone();
    match request.header.body {
        RequestBodyT::ApiVersionsRequest(_) => (
            ResponseBodyT::ApiVersionsResponse(Box::new(versions::api_versions_response(
                &all_apis(),
            ))),
            vec![],
            true,
            false,
        ),
        RequestBodyT::MetadataRequest(r) => {
            let mut s = inner.state.lock().unwrap();
            s.metadata_requests += 1;
            let mut resp = MetadataResponseT::default();
            resp.brokers = Some(
                s.brokers
                    .iter()
                    .map(|(id, host, port)| {
                        let mut b = MetadataBrokerT::default();
                        b.node_id = *id;
                        b.host = host.clone();
                        b.port = i32::from(*port);
                        b
                    })
                    .collect(),
            );
            resp.controller_id = 0;
            let names: Vec<String> = r
                .topics
                .clone()
                .unwrap_or_else(|| s.topics.keys().cloned().collect());
            resp.topics = Some(
                names
                    .into_iter()
                    .map(|name| {
                        let mut t = MetadataTopicT::default();
                        match s.topics.get(&name) {
                            Some(parts) => {
                                t.partitions = Some(
                                    parts
                                        .iter()
                                        .enumerate()
                                        .map(|(i, p)| {
                                            let mut mp = MetadataPartitionT::default();
                                            mp.partition_index = i as i32;
                                            mp.leader_id = p.leader;
                                            mp.leader_epoch = 0;
                                            mp.replica_nodes = Some(vec![p.leader]);
                                            mp.isr_nodes = Some(vec![p.leader]);
                                            mp
                                        })
                                        .collect(),
                                );
                            }
                            None => t.error_code = ErrorCode::UnknownTopicOrPartition.into(),
                        }
                        t.name = name;
                        t
                    })
                    .collect(),
            );
            drop(s);
            inner.changed.notify_all();
            (
                ResponseBodyT::MetadataResponse(Box::new(resp)),
                vec![],
                true,
                false,
            )
        }
        RequestBodyT::CreateTopicsRequest(r) => {
            let mut s = inner.state.lock().unwrap();
            let mut resp = CreateTopicsResponseT::default();
            resp.topics = Some(
                r.topics
                    .iter()
                    .flatten()
                    .map(|t| {
                        let mut res = CreatableTopicResultT::default();
                        res.name = t.name.clone();
                        if s.topics.contains_key(&t.name) {
                            res.error_code = ErrorCode::TopicAlreadyExists.into();
                        } else if t.name.is_empty() {
                            res.error_code = ErrorCode::InvalidTopicException.into();
                        } else {
                            let n = if t.num_partitions < 0 {
                                1
                            } else {
                                t.num_partitions
                            };
                            res.num_partitions = n;
                            let brokers = s.brokers.len() as i32;
                            s.topics.insert(
                                t.name.clone(),
                                (0..n)
                                    .map(|i| PartitionLog {
                                        leader: i % brokers,
                                        ..PartitionLog::default()
                                    })
                                    .collect(),
                            );
                        }
                        res
                    })
                    .collect(),
            );
            (
                ResponseBodyT::CreateTopicsResponse(Box::new(resp)),
                vec![],
                true,
                false,
            )
        }
        RequestBodyT::DeleteTopicsRequest(r) => {
            let mut s = inner.state.lock().unwrap();
            let mut resp = DeleteTopicsResponseT::default();
            resp.responses = Some(
                r.topic_names
                    .iter()
                    .flatten()
                    .map(|name| {
                        let mut res = DeletableTopicResultT::default();
                        res.name = name.clone();
                        if s.topics.remove(name).is_none() {
                            res.error_code = ErrorCode::UnknownTopicOrPartition.into();
                        }
                        res
                    })
                    .collect(),
            );
            (
                ResponseBodyT::DeleteTopicsResponse(Box::new(resp)),
                vec![],
                true,
                false,
            )
        }
        RequestBodyT::InitProducerIdRequest(_) => {
            let mut s = inner.state.lock().unwrap();
            s.next_producer_id += 1;
            let mut resp = InitProducerIdResponseT::default();
            resp.producer_id = 1000 + s.next_producer_id;
            resp.producer_epoch = 0;
            (
                ResponseBodyT::InitProducerIdResponse(Box::new(resp)),
                vec![],
                true,
                false,
            )
        }
        RequestBodyT::ProduceRequest(r) => produce(inner, broker_id, &r, &payload_bytes),
        RequestBodyT::FetchRequest(r) => fetch(inner, broker_id, &r),
        RequestBodyT::ListOffsetsRequest(r) => list_offsets(inner, broker_id, &r),
        _ => (ResponseBodyT::NONE, vec![], true, false),
    }
}

fn produce(inner: &Inner, broker_id: i32, r: &ProduceRequestT, payload_bytes: &Bytes) -> Handled {
    let mut s = inner.state.lock().unwrap();
    s.produce_requests += 1;
    inner.changed.notify_all();
    if s.produce_gate_closed {
        s.produces_held += 1;
        inner.changed.notify_all();
        while s.produce_gate_closed {
            s = inner.changed.wait(s).unwrap();
        }
        s.produces_held -= 1;
    }
    let mut resp = ProduceResponseT::default();
    let mut topics = Vec::new();
    for t in r.topics.iter().flatten() {
        let mut partitions = Vec::new();
        for p in t.partitions.iter().flatten() {
            let mut pr = PartitionProduceResponseT::default();
            pr.index = p.index;
            let code = append(&mut s, broker_id, &t.name, p, payload_bytes, &mut pr);
            pr.error_code = code.into();
            partitions.push(pr);
        }
        let mut tr = TopicProduceResponseT::default();
        tr.name = t.name.clone();
        tr.partitions = Some(partitions);
        topics.push(tr);
    }
    resp.responses = Some(topics);
    let drop_conn = std::mem::take(&mut s.drop_after_next_produce);
    drop(s);
    inner.changed.notify_all();
    (
        ResponseBodyT::ProduceResponse(Box::new(resp)),
        vec![],
        r.acks != 0,
        drop_conn,
    )
}

fn append(
    s: &mut State,
    broker_id: i32,
    topic: &str,
    p: &PartitionProduceDataT,
    payload_bytes: &Bytes,
    pr: &mut PartitionProduceResponseT,
) -> ErrorCode {
    if let Some(code) = take_fault(s, ApiKey::Produce, topic, p.index) {
        return code;
    }
    let Some(log) = s
        .topics
        .get_mut(topic)
        .and_then(|t| t.get_mut(p.index as usize))
    else {
        return ErrorCode::UnknownTopicOrPartition;
    };
    if log.leader != broker_id {
        return ErrorCode::NotLeaderOrFollower;
    }
    let Ok(bytes) = payload::slice(payload_bytes, &p.records) else {
        return ErrorCode::CorruptMessage;
    };
    let mut first_base = None;
    for item in BatchIter::new(&bytes, 1 << 26) {
        let Ok(batch) = item else {
            return ErrorCode::CorruptMessage;
        };
        let h = batch.header;
        if h.producer_id >= 0 {
            if let Some(&(seq, offset)) = log.sequences.get(&h.producer_id) {
                if h.base_sequence == seq {
                    // A retry of the last batch: its original offset, nothing appended.
                    pr.base_offset = offset;
                    return ErrorCode::None;
                }
            }
        }
        let mut copy = BytesMut::from(batch.bytes);
        sbatch::set_base_offset(&mut copy, log.next_offset);
        let count = i64::from(h.last_offset_delta) + 1;
        let base = log.next_offset;
        log.batches.push(StoredBatch {
            base_offset: base,
            last_offset: base + count - 1,
            bytes: copy.freeze(),
        });
        log.next_offset += count;
        if h.producer_id >= 0 {
            log.sequences.insert(h.producer_id, (h.base_sequence, base));
        }
        first_base.get_or_insert(base);
    }
    pr.base_offset = first_base.unwrap_or(-1);
    ErrorCode::None
}

fn fetch(inner: &Inner, broker_id: i32, r: &FetchRequestT) -> Handled {
    let mut s = inner.state.lock().unwrap();
    s.fetch_requests += 1;
    if std::mem::take(&mut s.drop_next_fetch) {
        return (ResponseBodyT::NONE, vec![], false, true);
    }
    let has_data = |s: &State| {
        r.topics.iter().flatten().any(|t| {
            t.partitions.iter().flatten().any(|p| {
                s.topics
                    .get(&t.topic)
                    .and_then(|parts| parts.get(p.partition as usize))
                    .is_none_or(|log| log.next_offset != p.fetch_offset || log.leader != broker_id)
            })
        })
    };
    // Long poll: hold until something to return or max_wait_ms passes.
    let deadline = Instant::now() + Duration::from_millis(r.max_wait_ms.max(0) as u64);
    while !has_data(&s) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        s = inner.changed.wait_timeout(s, deadline - now).unwrap().0;
    }
    let mut payload = PayloadBuilder::new();
    let mut responses = Vec::new();
    for t in r.topics.iter().flatten() {
        let mut partitions = Vec::new();
        for p in t.partitions.iter().flatten() {
            let mut d = FetchPartitionDataT::default();
            d.partition_index = p.partition;
            let fault = take_fault(&mut s, ApiKey::Fetch, &t.topic, p.partition);
            match (
                fault,
                s.topics
                    .get(&t.topic)
                    .and_then(|parts| parts.get(p.partition as usize)),
            ) {
                (Some(code), _) => d.error_code = code.into(),
                (None, None) => d.error_code = ErrorCode::UnknownTopicOrPartition.into(),
                (None, Some(log)) if log.leader != broker_id => {
                    d.error_code = ErrorCode::NotLeaderOrFollower.into()
                }
                (None, Some(log)) if p.fetch_offset > log.next_offset || p.fetch_offset < 0 => {
                    d.error_code = ErrorCode::OffsetOutOfRange.into();
                    d.high_watermark = log.next_offset;
                }
                (None, Some(log)) => {
                    d.high_watermark = log.next_offset;
                    d.last_stable_offset = log.next_offset;
                    d.log_start_offset = 0;
                    let mut chunk = BytesMut::new();
                    for b in log
                        .batches
                        .iter()
                        .filter(|b| b.last_offset >= p.fetch_offset)
                    {
                        if !chunk.is_empty()
                            && chunk.len() + b.bytes.len() > p.partition_max_bytes.max(0) as usize
                        {
                            break;
                        }
                        chunk.extend_from_slice(&b.bytes);
                    }
                    if !chunk.is_empty() {
                        d.records = Some(payload.push(chunk.freeze()).expect("payload"));
                    }
                }
            }
            partitions.push(d);
        }
        let mut tr = FetchableTopicResponseT::default();
        tr.topic = t.topic.clone();
        tr.partitions = Some(partitions);
        responses.push(tr);
    }
    let mut resp = FetchResponseT::default();
    resp.responses = Some(responses);
    (
        ResponseBodyT::FetchResponse(Box::new(resp)),
        payload.finish(),
        true,
        false,
    )
}

fn list_offsets(inner: &Inner, broker_id: i32, r: &ListOffsetsRequestT) -> Handled {
    let mut s = inner.state.lock().unwrap();
    let mut topics = Vec::new();
    for t in r.topics.iter().flatten() {
        let mut partitions = Vec::new();
        for p in t.partitions.iter().flatten() {
            let mut a = ListOffsetsPartitionResponseT::default();
            a.partition_index = p.partition_index;
            let fault = take_fault(&mut s, ApiKey::ListOffsets, &t.name, p.partition_index);
            match (
                fault,
                s.topics
                    .get(&t.name)
                    .and_then(|parts| parts.get(p.partition_index as usize)),
            ) {
                (Some(code), _) => a.error_code = code.into(),
                (None, None) => a.error_code = ErrorCode::UnknownTopicOrPartition.into(),
                (None, Some(log)) if log.leader != broker_id => {
                    a.error_code = ErrorCode::NotLeaderOrFollower.into()
                }
                (None, Some(log)) => {
                    a.offset = match p.timestamp {
                        -2 => 0,
                        -1 => log.next_offset,
                        ts => {
                            let mut found = -1;
                            'outer: for b in &log.batches {
                                let (h, records) = read_batch(&b.bytes, 1 << 26).expect("stored");
                                for rec in records {
                                    if h.base_timestamp + rec.timestamp_delta >= ts {
                                        found = h.base_offset + i64::from(rec.offset_delta);
                                        break 'outer;
                                    }
                                }
                            }
                            found
                        }
                    };
                }
            }
            partitions.push(a);
        }
        let mut tr = ListOffsetsTopicResponseT::default();
        tr.name = t.name.clone();
        tr.partitions = Some(partitions);
        topics.push(tr);
    }
    let mut resp = ListOffsetsResponseT::default();
    resp.topics = Some(topics);
    (
        ResponseBodyT::ListOffsetsResponse(Box::new(resp)),
        vec![],
        true,
        false,
    )
}
