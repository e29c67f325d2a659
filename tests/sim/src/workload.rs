//! [`AdminClient`]: the workload — an admin client that creates topics with replication factor 3
//! (and now and then deletes one) through whichever node leads the metadata quorum.
//!
//! Owns: the topic names it made up, the one request in flight, its guess of the leader.
//! Promises: at most one request in flight, retried on the next node after
//! `REQUEST_TIMEOUT_MS`; NOT_CONTROLLER follows the leader hint. Every choice (which operation,
//! how many partitions) is drawn from the world's [`SimRng`].
//! Never does: check anything (the checker reads the nodes' images).

use spool_protocol::ErrorCode;

use crate::broker::REQUEST_TIMEOUT_MS;
use crate::message::{Endpoint, Envelope, Payload};
use crate::rng::SimRng;

/// Probability that a new operation deletes a topic instead of creating one.
const DELETE_CHANCE: f64 = 0.15;

pub struct AdminClient {
    controllers: u64,
    guess: u64,
    next_request_id: u64,
    next_topic: u32,
    /// Topics it created (or found existing), deletable later.
    known: Vec<String>,
    /// `(request id, the request, sent at)`.
    in_flight: Option<(u64, Payload, u64)>,
    /// The last answer was NOT_CONTROLLER: resend to the new guess at the next tick.
    retry_now: bool,
    pub answered: u64,
}

impl AdminClient {
    pub fn new(controllers: u64) -> Self {
        AdminClient {
            controllers,
            guess: 1,
            next_request_id: 1,
            next_topic: 0,
            known: Vec::new(),
            in_flight: None,
            retry_now: false,
            answered: 0,
        }
    }

    fn envelope(&self, payload: Payload) -> Envelope {
        Envelope::new(Endpoint::Client, Endpoint::Node(self.guess), payload)
    }

    /// The workload timer fired.
    pub fn tick(&mut self, rng: &mut SimRng, now_ms: u64) -> Option<Envelope> {
        if let Some((id, payload, sent_ms)) = self.in_flight.take() {
            if !self.retry_now && now_ms.saturating_sub(sent_ms) < REQUEST_TIMEOUT_MS {
                self.in_flight = Some((id, payload, sent_ms));
                return None;
            }
            if !self.retry_now {
                self.guess = 1 + (self.guess % self.controllers);
            }
            self.retry_now = false;
            self.in_flight = Some((id, payload.clone(), now_ms));
            return Some(self.envelope(payload));
        }
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        let payload = if !self.known.is_empty() && rng.chance(DELETE_CHANCE) {
            let i = rng.below(self.known.len() as u64) as usize;
            Payload::DeleteTopic {
                request_id,
                name: self.known.swap_remove(i),
            }
        } else {
            self.next_topic += 1;
            Payload::CreateTopic {
                request_id,
                name: format!("t{}", self.next_topic),
                partitions: rng.range(1, 3) as i32,
                replication_factor: 3,
            }
        };
        self.in_flight = Some((request_id, payload.clone(), now_ms));
        Some(self.envelope(payload))
    }

    pub fn on_answer(&mut self, payload: &Payload) {
        let Payload::AdminAnswer {
            request_id,
            error,
            leader_hint,
        } = payload
        else {
            return;
        };
        let Some((id, request, _)) = &self.in_flight else {
            return;
        };
        if id != request_id {
            return;
        }
        if *error == ErrorCode::NotController {
            self.guess = if *leader_hint != 0 {
                *leader_hint
            } else {
                1 + (self.guess % self.controllers)
            };
            // Resend to the hinted node at the next tick.
            self.retry_now = true;
            return;
        }
        if let Payload::CreateTopic { name, .. } = request {
            if matches!(error, ErrorCode::None | ErrorCode::TopicAlreadyExists) {
                self.known.push(name.clone());
            }
        }
        self.answered += 1;
        self.in_flight = None;
    }
}
