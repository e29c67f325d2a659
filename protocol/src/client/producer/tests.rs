//! Unit tests of the producer core, driven by hand-made responses and a hand-moved clock.

use super::*;
use crate::client::test_util::*;
use crate::wire::InitProducerIdResponseT;
use bytes::Bytes;

fn core(config: ProducerConfig) -> ProducerCore {
    ProducerCore::new(config, vec!["boot:1".into()], 1).unwrap()
}

fn plain() -> ProducerConfig {
    ProducerConfig {
        acks: Acks::Leader,
        enable_idempotence: false,
        ..ProducerConfig::default()
    }
}

/// Answers the metadata request in `actions` and returns the next poll's actions.
fn with_metadata(
    p: &mut ProducerCore,
    actions: &[NetAction],
    leaders: &[i32],
    now_ms: u64,
) -> Vec<NetAction> {
    let reqs = requests(actions);
    let (addr, req) = reqs
        .iter()
        .find(|(_, r)| matches!(r.header.body, RequestBodyT::MetadataRequest(_)))
        .expect("a metadata request");
    p.on_response(
        addr,
        respond(req, metadata("t", leaders, 2), Bytes::new()),
        now_ms,
    );
    p.poll_actions(now_ms)
}

#[test]
fn batches_wait_for_linger_then_go_one_request_per_leader() {
    let mut p = core(plain());
    p.send(ProducerRecord::new("t", "a").with_partition(0), 0)
        .unwrap();
    p.send(ProducerRecord::new("t", "b").with_partition(1), 0)
        .unwrap();
    let first = p.poll_actions(0);
    let after_metadata = with_metadata(&mut p, &first, &[0, 1], 1);
    assert!(
        requests(&after_metadata).is_empty(),
        "linger_ms (5) not over yet"
    );
    // The batches opened when the metadata placed the records, at 1.
    assert_eq!(p.next_wakeup_ms(1), Some(6));
    assert!(requests(&p.poll_actions(5)).is_empty());
    let reqs = requests(&p.poll_actions(6));
    assert_eq!(reqs.len(), 2);
    let addrs: Vec<&str> = reqs.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(addrs, vec!["b0:1", "b1:1"]);
    for (addr, req) in &reqs {
        p.on_response(
            addr,
            respond(
                req,
                produce_response(req, ErrorCode::None, 41),
                Bytes::new(),
            ),
            6,
        );
    }
    let mut reports = p.take_reports();
    reports.sort_by_key(|r| r.id);
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0].result.as_ref().unwrap().offset, 41);
    assert_eq!(reports[0].result.as_ref().unwrap().partition, 0);
    assert!(p.is_idle());
}

#[test]
fn requests_in_flight_per_broker_are_bounded() {
    let config = ProducerConfig {
        max_in_flight_per_broker: 2,
        max_request_bytes: 1000,
        linger_ms: 0,
        ..plain()
    };
    let mut p = core(config);
    for part in 0..5 {
        p.send(
            ProducerRecord::new("t", vec![0u8; 600]).with_partition(part),
            0,
        )
        .unwrap();
    }
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0, 0, 0, 0, 0], 0));
    assert_eq!(reqs.len(), 2, "two in flight to broker 0, the rest wait");
    assert!(requests(&p.poll_actions(1)).is_empty());
    let (addr, req) = &reqs[0];
    p.on_response(
        addr,
        respond(req, produce_response(req, ErrorCode::None, 0), Bytes::new()),
        2,
    );
    assert_eq!(
        requests(&p.poll_actions(2)).len(),
        1,
        "one slot freed, one more request"
    );
}

#[test]
fn full_buffer_returns_the_record_until_a_delivery_frees_room() {
    let config = ProducerConfig {
        buffer_bytes: 1000,
        linger_ms: 0,
        ..plain()
    };
    let mut p = core(config);
    let mut sent = 0;
    let rejected = loop {
        match p.send(
            ProducerRecord::new("t", vec![1u8; 100]).with_partition(0),
            0,
        ) {
            Ok(_) => sent += 1,
            Err(SendError::BufferFull(r)) => break *r,
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(sent, 1000 / 121);
    assert!(p.buffered_bytes() <= 1000);
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0], 0));
    let (addr, req) = &reqs[0];
    assert!(
        matches!(p.send(rejected.clone(), 1), Err(SendError::BufferFull(_))),
        "still in flight"
    );
    p.on_response(
        addr,
        respond(req, produce_response(req, ErrorCode::None, 0), Bytes::new()),
        1,
    );
    assert_eq!(p.buffered_bytes(), 0);
    assert!(p.send(rejected, 1).is_ok());
}

#[test]
fn retriable_error_backs_off_and_resends_the_same_bytes_before_newer_batches() {
    let config = ProducerConfig {
        linger_ms: 0,
        retry_backoff_ms: 100,
        ..plain()
    };
    let mut p = core(config);
    p.send(ProducerRecord::new("t", "first").with_partition(0), 0)
        .unwrap();
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0], 0));
    let (addr, req) = &reqs[0];
    p.on_response(
        addr,
        respond(
            req,
            produce_response(req, ErrorCode::NotEnoughReplicas, -1),
            Bytes::new(),
        ),
        10,
    );
    p.send(ProducerRecord::new("t", "second").with_partition(0), 10)
        .unwrap();
    assert!(
        requests(&p.poll_actions(50)).is_empty(),
        "backing off; the newer batch waits behind it"
    );
    assert_eq!(p.next_wakeup_ms(50), Some(110));
    let again = requests(&p.poll_actions(110));
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].1.payload, req.payload,
        "the retry resends the very same batch"
    );
    let (addr, req) = &again[0];
    p.on_response(
        addr,
        respond(req, produce_response(req, ErrorCode::None, 7), Bytes::new()),
        111,
    );
    let next = requests(&p.poll_actions(111));
    assert_eq!(next.len(), 1, "now the newer batch goes");
    let reports = p.take_reports();
    assert_eq!(reports[0].result.as_ref().unwrap().offset, 7);
    assert_eq!(p.stats().batch_retries, 1);
}

#[test]
fn not_leader_requests_a_metadata_refresh() {
    let config = ProducerConfig {
        linger_ms: 0,
        retry_backoff_ms: 10,
        ..plain()
    };
    let mut p = core(config);
    p.send(ProducerRecord::new("t", "x").with_partition(0), 0)
        .unwrap();
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0], 0));
    let (addr, req) = &reqs[0];
    p.on_response(
        addr,
        respond(
            req,
            produce_response(req, ErrorCode::NotLeaderOrFollower, -1),
            Bytes::new(),
        ),
        1,
    );
    let after = p.poll_actions(200);
    let metadata_requests = requests(&after)
        .iter()
        .filter(|(_, r)| matches!(r.header.body, RequestBodyT::MetadataRequest(_)))
        .count();
    assert_eq!(metadata_requests, 1);
    // The new leader is broker 1: the retry goes there.
    let retry = requests(&with_metadata(&mut p, &after, &[1], 201));
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].0, "b1:1");
}

#[test]
fn a_retry_goes_to_a_new_leader_at_once_and_keeps_the_metadata_fresh_until_one_is_elected() {
    let config = ProducerConfig {
        linger_ms: 0,
        retry_backoff_ms: 100,
        retry_backoff_max_ms: 1000,
        ..plain()
    };
    let mut p = core(config);
    p.send(ProducerRecord::new("t", "x").with_partition(0), 0)
        .unwrap();
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0], 0));
    let (addr, req) = &reqs[0];
    assert_eq!(addr, "b0:1");
    // The leader's connection dies (kill -9): the batch backs off 100 ms, and the metadata is
    // asked for again.
    p.on_disconnect(addr, 10);
    let refresh = p.poll_actions(120);
    // Still broker 0 (the controller has not fenced it yet): the retry goes back there, at its
    // backoff, and the producer keeps refreshing while the leader has not moved.
    let retried = requests(&with_metadata(&mut p, &refresh, &[0], 121));
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0].0, "b0:1");
    p.on_disconnect(&retried[0].0, 130);
    // Its second backoff is 200 ms (until 330); a refresh is due before that.
    let refresh = p.poll_actions(240);
    assert!(
        requests(&refresh)
            .iter()
            .any(|(_, r)| matches!(r.header.body, RequestBodyT::MetadataRequest(_))),
        "the metadata is refreshed while the retry waits for a new leader"
    );
    // Broker 1 leads now: the retry goes at once, 90 ms before its backoff ends.
    let moved = requests(&with_metadata(&mut p, &refresh, &[1], 241));
    assert_eq!(moved.len(), 1, "sent when the leader moved, not at 330");
    assert_eq!(moved[0].0, "b1:1");
    assert_eq!(moved[0].1.payload, req.payload, "the same batch");
}

#[test]
fn lost_connection_retries_and_unanswered_requests_time_out() {
    let config = ProducerConfig {
        linger_ms: 0,
        request_timeout_ms: 1000,
        retry_backoff_ms: 10,
        ..plain()
    };
    let mut p = core(config);
    p.send(ProducerRecord::new("t", "x").with_partition(0), 0)
        .unwrap();
    let first = p.poll_actions(0);
    let reqs = requests(&with_metadata(&mut p, &first, &[0], 0));
    p.on_disconnect(&reqs[0].0, 5);
    assert_eq!(p.stats().batch_retries, 1);
    // Metadata refresh then resend; this time nobody answers.
    let actions = p.poll_actions(100);
    let resent = requests(&with_metadata(&mut p, &actions, &[0], 100));
    assert_eq!(resent.len(), 1);
    let timed_out = p.poll_actions(100 + 1000);
    assert!(timed_out
        .iter()
        .any(|a| matches!(a, NetAction::Close { addr } if addr == "b0:1")));
    assert_eq!(p.stats().batch_retries, 2);
}

#[test]
fn records_fail_after_the_delivery_timeout() {
    let config = ProducerConfig {
        delivery_timeout_ms: 1000,
        ..plain()
    };
    let mut p = core(config);
    p.send(ProducerRecord::new("nowhere", "x"), 0).unwrap();
    let _ = p.poll_actions(0); // the metadata request, never answered
    let _ = p.poll_actions(999);
    assert!(p.take_reports().is_empty());
    let _ = p.poll_actions(1000);
    let reports = p.take_reports();
    assert!(matches!(
        reports[0].result,
        Err(ClientError::Timeout { .. })
    ));
    assert!(p.is_idle());
}

#[test]
fn a_record_for_an_unknown_topic_fails_after_max_block_ms_naming_the_cause() {
    let config = ProducerConfig {
        max_block_ms: 500,
        delivery_timeout_ms: 1000,
        ..plain()
    };
    let mut p = core(config);
    p.send(ProducerRecord::new("nowhere", "x"), 0).unwrap();
    let first = p.poll_actions(0);
    let reqs = requests(&first);
    let (addr, req) = reqs
        .iter()
        .find(|(_, r)| matches!(r.header.body, RequestBodyT::MetadataRequest(_)))
        .expect("a metadata request");
    let mut body = metadata("nowhere", &[], 1);
    if let ResponseBodyT::MetadataResponse(m) = &mut body {
        for t in m.topics.iter_mut().flatten() {
            t.error_code = crate::ErrorCode::UnknownTopicOrPartition.into();
        }
    }
    p.on_response(addr, respond(req, body, Bytes::new()), 1);
    // Still retried within the bound: the topic may be being created.
    let _ = p.poll_actions(499);
    assert!(p.take_reports().is_empty());
    assert_eq!(p.next_wakeup_ms(499).filter(|t| *t <= 500), Some(500));
    let _ = p.poll_actions(500);
    let reports = p.take_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        reports[0]
            .result
            .as_ref()
            .err()
            .and_then(ClientError::error_code),
        Some(crate::ErrorCode::UnknownTopicOrPartition),
        "got {:?}",
        reports[0].result
    );
    assert!(p.is_idle());
}

/// Answers the InitProducerId request among `reqs` with `(id, epoch)`.
fn answer_pid(
    p: &mut ProducerCore,
    reqs: &[(String, crate::codec::Request)],
    (producer_id, producer_epoch): (i64, i16),
    now_ms: u64,
) {
    let (addr, req) = reqs
        .iter()
        .find(|(_, r)| matches!(r.header.body, RequestBodyT::InitProducerIdRequest(_)))
        .expect("InitProducerId");
    let mut r = InitProducerIdResponseT::default();
    r.producer_id = producer_id;
    r.producer_epoch = producer_epoch;
    let body = ResponseBodyT::InitProducerIdResponse(Box::new(r));
    p.on_response(addr, respond(req, body, Bytes::new()), now_ms);
}

#[test]
fn idempotent_producer_gets_an_id_and_numbers_batches() {
    let config = ProducerConfig {
        linger_ms: 0,
        ..ProducerConfig::default()
    };
    let mut p = core(config);
    p.send(ProducerRecord::new("t", "a").with_partition(0), 0)
        .unwrap();
    p.send(ProducerRecord::new("t", "b").with_partition(0), 0)
        .unwrap();
    let first = p.poll_actions(0);
    let mut reqs = requests(&first);
    reqs.extend(requests(&with_metadata(&mut p, &first, &[0], 0)));
    assert!(
        reqs.iter()
            .all(|(_, r)| !matches!(r.header.body, RequestBodyT::ProduceRequest(_))),
        "no produce before an id"
    );
    answer_pid(&mut p, &reqs, (77, 3), 1);
    let reqs = requests(&p.poll_actions(1));
    let (addr, req) = &reqs[0];
    let h = spool_storage::batch::validate(&req.payload, 1 << 20).unwrap();
    assert_eq!(
        (
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.record_count
        ),
        (77, 3, 0, 2)
    );
    p.on_response(
        addr,
        respond(req, produce_response(req, ErrorCode::None, 0), Bytes::new()),
        2,
    );
    p.send(ProducerRecord::new("t", "c").with_partition(0), 2)
        .unwrap();
    let reqs = requests(&p.poll_actions(2));
    let h = spool_storage::batch::validate(&reqs[0].1.payload, 1 << 20).unwrap();
    assert_eq!(
        h.base_sequence, 2,
        "sequence continues after the first batch's two records"
    );
}

#[test]
fn explicit_partition_outside_the_topic_fails_the_record() {
    let mut p = core(ProducerConfig {
        linger_ms: 0,
        ..plain()
    });
    p.send(ProducerRecord::new("t", "x").with_partition(9), 0)
        .unwrap();
    let first = p.poll_actions(0);
    let _ = with_metadata(&mut p, &first, &[0, 1], 0);
    let reports = p.take_reports();
    assert!(matches!(
        reports[0].result,
        Err(ClientError::InvalidPartition {
            partition: 9,
            partitions: 2,
            ..
        })
    ));
    assert!(p.is_idle());
}

#[test]
fn an_unknown_topic_does_not_hold_up_known_ones() {
    let mut p = core(ProducerConfig {
        linger_ms: 0,
        ..plain()
    });
    p.send(ProducerRecord::new("missing", "x"), 0).unwrap();
    p.send(ProducerRecord::new("t", "y").with_partition(0), 0)
        .unwrap();
    let first = p.poll_actions(0);
    // Metadata knows "t" but not "missing": the "t" record goes anyway.
    let reqs = requests(&with_metadata(&mut p, &first, &[0], 0));
    assert_eq!(reqs.len(), 1);
    assert!(matches!(
        reqs[0].1.header.body,
        RequestBodyT::ProduceRequest(_)
    ));
}

#[test]
fn the_driver_is_needed_once_per_batch_not_once_per_record() {
    let mut p = core(ProducerConfig {
        batch_bytes: 1000,
        ..plain()
    });
    // Unknown topic: the record waits for metadata, which only the driver fetches.
    p.send(ProducerRecord::new("t", "first").with_partition(0), 0)
        .unwrap();
    assert!(p.take_drive_needed(), "a record waiting for metadata");
    let first = p.poll_actions(0);
    with_metadata(&mut p, &first, &[0, 1], 1);
    p.take_drive_needed();
    // The waiting record opened partition 0's batch; records that only join it need nothing.
    let value = vec![b'v'; 100];
    let mut quiet = 0;
    let mut woke_at = Vec::new();
    for i in 0..20 {
        p.send(ProducerRecord::new("t", value.clone()).with_partition(0), 1)
            .unwrap();
        if p.take_drive_needed() {
            woke_at.push(i);
        } else {
            quiet += 1;
        }
    }
    // About 120 bytes a record into 1000-byte batches: a wake each time a batch fills or a
    // new one opens, a handful in all, and most sends need none.
    assert!(
        !woke_at.is_empty(),
        "a batch filled: the driver must send it"
    );
    assert!(woke_at.len() <= 6, "woken at {woke_at:?}");
    assert!(quiet >= 14, "{quiet} quiet sends of 20");
    // Each wake was for a batch now ready to go: the driver finds one to send at once.
    let ready = p.acc.ready_partitions(1, false);
    assert_eq!(ready.len(), 1, "partition 0's full batch is ready");
    // A record to a partition with no open batch opens one: a new linger deadline.
    p.send(ProducerRecord::new("t", "x").with_partition(1), 1)
        .unwrap();
    assert!(p.take_drive_needed());
    assert!(!p.take_drive_needed(), "the flag clears when taken");
}

#[path = "pipeline_tests.rs"]
mod pipeline;

#[path = "send_tests.rs"]
mod units;
