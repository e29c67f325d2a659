//! Helpers for the sans-IO cores' unit tests: decode the requests a core emits and build the
//! responses a broker would send, with no socket and a clock the test moves by hand.

use bytes::Bytes;

use crate::client::net::{ClientCore, NetAction};
use crate::codec::{self, decode_request, Request, Response};
use crate::frame::{split_frame, FrameLimits};
use crate::wire::*;

/// The requests among `actions`, decoded, with their addresses.
pub fn requests(actions: &[NetAction]) -> Vec<(String, Request)> {
    let limits = FrameLimits::default();
    actions
        .iter()
        .filter_map(|a| match a {
            NetAction::Send { addr, frame, .. } => {
                let raw = split_frame(frame.to_bytes(), &limits).expect("frame");
                Some((
                    addr.clone(),
                    decode_request(&raw, &limits).expect("request"),
                ))
            }
            NetAction::Close { .. } => None,
        })
        .collect()
}

/// The one request `core` sends next: at `*now_ms` if it has one, else at its next wake-up (a
/// retry backing off), moving `*now_ms` there.
pub fn next_request(core: &mut impl ClientCore, now_ms: &mut u64) -> (String, Request) {
    let mut reqs = requests(&core.poll_actions(*now_ms));
    if reqs.is_empty() {
        *now_ms = core.next_wakeup_ms(*now_ms).expect("a retry is due");
        reqs = requests(&core.poll_actions(*now_ms));
    }
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    reqs.remove(0)
}

/// A response to `req` carrying `body` and `payload`.
pub fn respond(req: &Request, body: ResponseBodyT, payload: Bytes) -> Response {
    Response {
        header: codec::response(req.header.correlation_id, 0, body),
        payload,
    }
}

/// Metadata for `topic` with one partition per entry of `leaders`; brokers `b0:1`, `b1:1`, ….
pub fn metadata(topic: &str, leaders: &[i32], brokers: i32) -> ResponseBodyT {
    let mut r = MetadataResponseT::default();
    r.brokers = Some(
        (0..brokers)
            .map(|id| {
                let mut b = MetadataBrokerT::default();
                b.node_id = id;
                b.host = format!("b{id}");
                b.port = 1;
                b
            })
            .collect(),
    );
    let mut t = MetadataTopicT::default();
    t.name = topic.to_owned();
    t.partitions = Some(
        leaders
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut p = MetadataPartitionT::default();
                p.partition_index = i as i32;
                p.leader_id = *l;
                p
            })
            .collect(),
    );
    r.topics = Some(vec![t]);
    ResponseBodyT::MetadataResponse(Box::new(r))
}

/// A produce response answering every partition of `req` with `code` and `base_offset`.
pub fn produce_response(req: &Request, code: crate::ErrorCode, base_offset: i64) -> ResponseBodyT {
    let RequestBodyT::ProduceRequest(p) = &req.header.body else {
        panic!("not a produce request")
    };
    let mut r = ProduceResponseT::default();
    r.responses = Some(
        p.topics
            .iter()
            .flatten()
            .map(|t| {
                let mut tr = TopicProduceResponseT::default();
                tr.name = t.name.clone();
                tr.partitions = Some(
                    t.partitions
                        .iter()
                        .flatten()
                        .map(|pp| {
                            let mut pr = PartitionProduceResponseT::default();
                            pr.index = pp.index;
                            pr.error_code = code.into();
                            pr.base_offset = base_offset;
                            pr
                        })
                        .collect(),
                );
                tr
            })
            .collect(),
    );
    ResponseBodyT::ProduceResponse(Box::new(r))
}
