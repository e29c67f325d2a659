//! The produce requests one drain builds: batches grouped per leader address into requests of
//! at most `max_request_bytes`, with at most `max_in_flight` requests outstanding per address
//! (those already in flight included).
//!
//! A partition has one batch per request (its records field holds one batch), so its next
//! batch goes into a later request, and requests leave in the order they were opened: the
//! broker receives a partition's batches in the order they were closed.

use std::collections::{BTreeMap, HashMap};

use crate::client::accumulator::ClosedBatch;
use crate::client::net::Addr;
use crate::client::TopicPartition;

#[derive(Debug, Default)]
struct Request {
    batches: Vec<ClosedBatch>,
    bytes: usize,
}

/// Where [`Plans::slot`] found room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// The last request opened to this address.
    Last(Addr),
    /// A new request to this address.
    New(Addr),
}

/// The requests being built (module docs).
#[derive(Debug)]
pub struct Plans {
    by_addr: BTreeMap<Addr, Vec<Request>>,
    /// The request (address, index) holding each partition's latest batch.
    last_of: HashMap<TopicPartition, (Addr, usize)>,
    max_in_flight: usize,
    max_request_bytes: usize,
}

impl Plans {
    pub fn new(max_in_flight: usize, max_request_bytes: usize) -> Self {
        Self {
            by_addr: BTreeMap::new(),
            last_of: HashMap::new(),
            max_in_flight,
            max_request_bytes,
        }
    }

    /// Where a batch of `tp` of at most `bytes` would go to `addr`, which has `in_flight`
    /// requests outstanding: the last request opened to it if that has room and no batch of
    /// `tp`, else a new one if `addr` may have another outstanding; `None` if neither.
    pub fn slot(
        &self,
        addr: &Addr,
        tp: &TopicPartition,
        bytes: usize,
        in_flight: usize,
    ) -> Option<Slot> {
        let requests = self.by_addr.get(addr).map_or(&[][..], |r| &r[..]);
        if let Some(last) = requests.last() {
            let holds_tp = self
                .last_of
                .get(tp)
                .is_some_and(|(a, i)| a == addr && *i + 1 == requests.len());
            if !holds_tp && last.bytes + bytes <= self.max_request_bytes {
                return Some(Slot::Last(addr.clone()));
            }
        }
        (in_flight + requests.len() < self.max_in_flight).then(|| Slot::New(addr.clone()))
    }

    /// Puts `batch` where [`Plans::slot`] said.
    pub fn put(&mut self, slot: Slot, batch: ClosedBatch) {
        let (addr, new) = match slot {
            Slot::Last(addr) => (addr, false),
            Slot::New(addr) => (addr, true),
        };
        let requests = self.by_addr.entry(addr.clone()).or_default();
        if new || requests.is_empty() {
            requests.push(Request::default());
        }
        let index = requests.len() - 1;
        let request = &mut requests[index];
        request.bytes += batch.bytes.len();
        self.last_of.insert(batch.tp.clone(), (addr, index));
        request.batches.push(batch);
    }

    /// The requests, each address's in the order they were opened.
    pub fn into_requests(self) -> impl Iterator<Item = (Addr, Vec<ClosedBatch>)> {
        self.by_addr.into_iter().flat_map(|(addr, requests)| {
            requests
                .into_iter()
                .filter(|r| !r.batches.is_empty())
                .map(move |r| (addr.clone(), r.batches))
        })
    }
}
