//! The transactional producer core ([`super::txn`]), driven by hand-made responses: a commit
//! in order (coordinator, producer id, AddPartitionsToTxn before any produce, EndTxn only after
//! every delivery), an abort after a failed record (then a new epoch), and fencing.

use super::*;
use crate::client::test_util::*;
use crate::codec::Request;
use crate::wire::{
    AddPartitionsToTxnPartitionResultT, AddPartitionsToTxnResponseT,
    AddPartitionsToTxnTopicResultT, CoordinatorType, FindCoordinatorResponseT,
    InitProducerIdResponseT,
};
use bytes::Bytes;

const ID: &str = "txn-a";
const COORDINATOR: &str = "b1:1";

fn transactional() -> ProducerConfig {
    ProducerConfig {
        linger_ms: 0,
        transactional_id: Some(ID.into()),
        ..ProducerConfig::default()
    }
}

/// Answers every request of the next poll at `now_ms` with `answer` (None: leave it in
/// flight); returns the requests it saw.
fn step(
    p: &mut ProducerCore,
    now_ms: u64,
    mut answer: impl FnMut(&str, &Request) -> Option<ResponseBodyT>,
) -> Vec<(String, Request)> {
    let reqs = requests(&p.poll_actions(now_ms));
    for (addr, req) in &reqs {
        if let Some(body) = answer(addr, req) {
            p.on_response(addr, respond(req, body, Bytes::new()), now_ms);
        }
    }
    reqs
}

fn kinds(reqs: &[(String, Request)]) -> Vec<&'static str> {
    reqs.iter()
        .map(|(_, r)| match &r.header.body {
            RequestBodyT::MetadataRequest(_) => "metadata",
            RequestBodyT::FindCoordinatorRequest(_) => "find",
            RequestBodyT::InitProducerIdRequest(_) => "init",
            RequestBodyT::AddPartitionsToTxnRequest(_) => "add",
            RequestBodyT::ProduceRequest(_) => "produce",
            RequestBodyT::EndTxnRequest(_) => "end",
            _ => "other",
        })
        .collect()
}

fn coordinator_found() -> ResponseBodyT {
    let mut r = FindCoordinatorResponseT::default();
    r.node_id = 1;
    r.host = Some("b1".into());
    r.port = 1;
    ResponseBodyT::FindCoordinatorResponse(Box::new(r))
}

fn producer_id(epoch: i16) -> ResponseBodyT {
    let mut r = InitProducerIdResponseT::default();
    r.producer_id = 7;
    r.producer_epoch = epoch;
    ResponseBodyT::InitProducerIdResponse(Box::new(r))
}

fn added(req: &Request, code: ErrorCode) -> ResponseBodyT {
    let RequestBodyT::AddPartitionsToTxnRequest(a) = &req.header.body else {
        panic!("not AddPartitionsToTxn")
    };
    let mut r = AddPartitionsToTxnResponseT::default();
    r.results_by_topic = Some(
        a.topics
            .iter()
            .flatten()
            .map(|t| {
                let mut tr = AddPartitionsToTxnTopicResultT::default();
                tr.name = t.name.clone();
                tr.results_by_partition = Some(
                    t.partitions
                        .iter()
                        .flatten()
                        .map(|&p| {
                            let mut pr = AddPartitionsToTxnPartitionResultT::default();
                            pr.partition_index = p;
                            pr.partition_error_code = code.into();
                            pr
                        })
                        .collect(),
                );
                tr
            })
            .collect(),
    );
    ResponseBodyT::AddPartitionsToTxnResponse(Box::new(r))
}

fn ended() -> ResponseBodyT {
    ResponseBodyT::EndTxnResponse(Box::default())
}

/// A producer that found its coordinator and holds producer id 7 at `epoch` 0.
fn ready() -> ProducerCore {
    let mut p = ProducerCore::new(transactional(), vec!["boot:1".into()], 1).unwrap();
    let seen = step(&mut p, 0, |_, r| match &r.header.body {
        RequestBodyT::MetadataRequest(_) => Some(metadata("t", &[0, 0], 2)),
        RequestBodyT::FindCoordinatorRequest(f) => {
            assert_eq!(
                (f.key.as_str(), f.key_type),
                (ID, CoordinatorType::Transaction)
            );
            Some(coordinator_found())
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["metadata", "find"]);
    assert_eq!(p.transaction_phase(), Some(&TxnPhase::Initializing));
    let seen = step(&mut p, 1, |addr, r| match &r.header.body {
        RequestBodyT::InitProducerIdRequest(i) => {
            assert_eq!(addr, COORDINATOR);
            assert_eq!(i.transactional_id.as_deref(), Some(ID));
            Some(producer_id(0))
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["init"]);
    assert_eq!(p.transaction_phase(), Some(&TxnPhase::Ready));
    p
}

#[test]
fn a_commit_adds_partitions_first_and_ends_after_every_delivery() {
    let mut p = ready();
    assert!(
        matches!(
            p.send(ProducerRecord::new("t", "x").with_partition(0), 2),
            Err(SendError::Rejected(ClientError::Transaction(_)))
        ),
        "no send outside a transaction"
    );
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("t", "a").with_partition(0), 2)
        .unwrap();
    p.send(ProducerRecord::new("t", "b").with_partition(1), 2)
        .unwrap();
    let mut add = None;
    let seen = step(&mut p, 2, |_, r| {
        add = Some(r.clone());
        None
    });
    assert_eq!(
        kinds(&seen),
        vec!["add"],
        "nothing produced before the partitions are added"
    );
    p.commit_transaction().unwrap();
    let add = add.unwrap();
    p.on_response(
        COORDINATOR,
        respond(&add, added(&add, ErrorCode::None), Bytes::new()),
        3,
    );
    let mut produce = Vec::new();
    let seen = step(&mut p, 3, |addr, r| {
        produce.push((addr.to_string(), r.clone()));
        None
    });
    assert_eq!(
        kinds(&seen),
        vec!["produce"],
        "one request to the leader, b0"
    );
    let (addr, req) = &produce[0];
    let RequestBodyT::ProduceRequest(body) = &req.header.body else {
        unreachable!()
    };
    assert_eq!(body.transactional_id.as_deref(), Some(ID));
    let batch = req.payload.slice(..);
    let h = spool_storage::batch::BatchHeader::parse(&batch).unwrap();
    assert!(h.is_transactional(), "batches carry the transactional bit");
    assert_eq!((h.producer_id, h.producer_epoch), (7, 0));
    assert!(
        kinds(&step(&mut p, 4, |_, _| None)).is_empty(),
        "no EndTxn while records are in flight"
    );
    p.on_response(
        addr,
        respond(
            req,
            produce_response(req, ErrorCode::None, 10),
            Bytes::new(),
        ),
        5,
    );
    let seen = step(&mut p, 5, |_, r| match &r.header.body {
        RequestBodyT::EndTxnRequest(e) => {
            assert!(e.committed);
            assert_eq!((e.producer_id, e.producer_epoch), (7, 0));
            Some(ended())
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["end"]);
    assert_eq!(p.take_transaction_outcome(), Some(Ok(())));
    assert_eq!(p.transaction_phase(), Some(&TxnPhase::Ready));
    assert_eq!(p.take_reports().len(), 2);
}

#[test]
fn a_failed_record_makes_the_transaction_abortable_then_a_new_epoch_follows() {
    let mut p = ready();
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("t", "a").with_partition(0), 2)
        .unwrap();
    step(&mut p, 2, |_, r| Some(added(r, ErrorCode::None)));
    let seen = step(&mut p, 3, |_, r| {
        Some(produce_response(r, ErrorCode::InvalidRecord, -1))
    });
    assert_eq!(kinds(&seen), vec!["produce"]);
    assert!(matches!(
        p.transaction_phase(),
        Some(TxnPhase::Abortable(_))
    ));
    assert!(
        p.commit_transaction().is_err(),
        "an abortable transaction cannot commit"
    );
    p.abort_transaction().unwrap();
    let seen = step(&mut p, 4, |_, r| match &r.header.body {
        RequestBodyT::EndTxnRequest(e) => {
            assert!(!e.committed);
            Some(ended())
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["end"]);
    assert!(p.take_transaction_outcome().unwrap().is_err(), "aborted");
    assert_eq!(p.transaction_phase(), Some(&TxnPhase::Initializing));
    let seen = step(&mut p, 5, |_, r| match &r.header.body {
        RequestBodyT::InitProducerIdRequest(i) => {
            assert_eq!(
                (i.producer_id, i.producer_epoch),
                (7, 0),
                "KIP-360: bump this one"
            );
            Some(producer_id(1))
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["init"]);
    assert_eq!(p.transaction_phase(), Some(&TxnPhase::Ready));
}

#[test]
fn a_fenced_producer_stops_and_busy_coordinators_are_retried() {
    let mut p = ready();
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("t", "a").with_partition(0), 2)
        .unwrap();
    let seen = step(&mut p, 2, |_, r| {
        Some(added(r, ErrorCode::ConcurrentTransactions))
    });
    assert_eq!(kinds(&seen), vec!["add"]);
    let mut now = 2;
    let (_, again) = next_request(&mut p, &mut now);
    assert!(now > 2, "after a backoff");
    assert!(matches!(
        again.header.body,
        RequestBodyT::AddPartitionsToTxnRequest(_)
    ));
    p.on_response(
        COORDINATOR,
        respond(
            &again,
            added(&again, ErrorCode::ProducerFenced),
            Bytes::new(),
        ),
        now,
    );
    assert!(matches!(p.transaction_phase(), Some(TxnPhase::Fatal(_))));
    assert_eq!(p.take_reports().len(), 1, "the queued record failed");
    assert!(p.send(ProducerRecord::new("t", "b"), now).is_err());
    assert!(kinds(&step(&mut p, now + 10_000, |_, _| None))
        .iter()
        .all(|k| *k == "metadata"));
}

#[test]
fn a_transaction_that_added_nothing_ends_without_the_coordinator() {
    let mut p = ready();
    p.begin_transaction().unwrap();
    p.commit_transaction().unwrap();
    assert!(kinds(&step(&mut p, 2, |_, _| None)).is_empty());
    assert_eq!(p.take_transaction_outcome(), Some(Ok(())));
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("t", "a").with_partition(0), 3)
        .unwrap();
    p.abort_transaction().unwrap();
    assert!(kinds(&step(&mut p, 3, |_, _| None)).is_empty(), "no EndTxn");
    assert!(p.take_transaction_outcome().unwrap().is_err());
    let reports = p.take_reports();
    assert!(
        matches!(&reports[0].result, Err(ClientError::Transaction(_))),
        "the unsent record failed: {reports:?}"
    );
    assert_eq!(p.transaction_phase(), Some(&TxnPhase::Ready));
}

#[test]
fn offsets_join_the_transaction_then_go_to_the_groups_coordinator() {
    let mut p = ready();
    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction("g", vec![(TopicPartition::new("t", 0), 42)])
        .unwrap();
    let seen = step(&mut p, 2, |addr, r| match &r.header.body {
        RequestBodyT::AddOffsetsToTxnRequest(a) => {
            assert_eq!((addr, a.group_id.as_str()), (COORDINATOR, "g"));
            Some(ResponseBodyT::AddOffsetsToTxnResponse(Box::default()))
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["other"], "AddOffsetsToTxn");
    let seen = step(&mut p, 3, |_, r| match &r.header.body {
        RequestBodyT::FindCoordinatorRequest(f) => {
            assert_eq!((f.key.as_str(), f.key_type), ("g", CoordinatorType::Group));
            let mut c = FindCoordinatorResponseT::default();
            c.host = Some("b0".into());
            c.port = 1;
            Some(ResponseBodyT::FindCoordinatorResponse(Box::new(c)))
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["find"]);
    p.commit_transaction().unwrap();
    let seen = step(&mut p, 4, |addr, r| match &r.header.body {
        RequestBodyT::TxnOffsetCommitRequest(c) => {
            assert_eq!(addr, "b0:1");
            assert_eq!((c.producer_id, c.group_id.as_str()), (7, "g"));
            Some(ResponseBodyT::TxnOffsetCommitResponse(Box::default()))
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["other"], "TxnOffsetCommit before EndTxn");
    assert_eq!(p.take_offsets_outcome(), Some(Ok(())));
    let seen = step(&mut p, 5, |_, r| match &r.header.body {
        RequestBodyT::EndTxnRequest(e) => {
            assert!(e.committed);
            Some(ended())
        }
        _ => None,
    });
    assert_eq!(kinds(&seen), vec!["end"], "the offsets joined: EndTxn goes");
    assert_eq!(p.take_transaction_outcome(), Some(Ok(())));
}
