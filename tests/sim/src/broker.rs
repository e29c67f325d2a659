//! [`SimBroker`]: a broker as the controller sees it — it registers, then heartbeats every
//! `heartbeat_interval_ms` to whichever node it believes leads the metadata quorum.
//!
//! Owns: the broker's incarnation (a fresh incarnation id on every start), its broker epoch once
//! registered, its guess of the controller leader, the highest metadata offset it has been told
//! of (reported in its next heartbeat, standing in for following the metadata log), and its one
//! request in flight.
//! Promises: at most one request in flight; a request unanswered for `request_timeout_ms` is
//! given up and the next node tried; NOT_CONTROLLER follows the answer's leader hint;
//! STALE_BROKER_EPOCH / BROKER_NOT_AVAILABLE on a heartbeat makes it register again (as a
//! broker whose registration was lost must); a refused registration —
//! DUPLICATE_BROKER_REGISTRATION while a restarted broker's previous incarnation is unfenced or
//! its session live, or NOT_CONTROLLER — is sent again at the next tick (every
//! `heartbeat_interval_ms`, 250 ms; the real broker retries after 100 ms), for as long as it
//! takes (the real broker gives up after three session timeouts of duplicate refusals,
//! `DUPLICATE_PATIENCE_SESSIONS`; this one does not, so liveness judges the controller alone).
//! Never does: read a clock (time is `now_ms`) or decide anything for the controller.

use spool_protocol::ErrorCode;
use spool_raft::validate::HeartbeatRequest;
use spool_raft::Uuid128;

use crate::message::{Endpoint, Envelope, Payload};

/// Unanswered requests are given up after this long.
pub const REQUEST_TIMEOUT_MS: u64 = 500;

pub struct SimBroker {
    id: i32,
    up: bool,
    incarnations: u64,
    epoch: Option<i64>,
    /// The broker epoch its data directory records (the real broker's mark under
    /// `durability = fsync`, written at each registration): kept through a crash, gone with a
    /// wiped disk.
    recorded_epoch: i64,
    fenced: bool,
    controller_guess: u64,
    controllers: u64,
    metadata_offset: i64,
    in_flight_since_ms: Option<u64>,
}

impl SimBroker {
    pub fn new(id: i32, controllers: u64) -> Self {
        SimBroker {
            id,
            up: false,
            incarnations: 0,
            epoch: None,
            recorded_epoch: -1,
            fenced: true,
            controller_guess: 1 + (id as u64 % controllers),
            controllers,
            metadata_offset: -1,
            in_flight_since_ms: None,
        }
    }

    pub fn id(&self) -> i32 {
        self.id
    }

    pub fn is_up(&self) -> bool {
        self.up
    }

    /// What the broker last heard: `Some(epoch)` once registered.
    pub fn epoch(&self) -> Option<i64> {
        self.epoch
    }

    /// The controller node it sends to next.
    pub fn controller_guess(&self) -> u64 {
        self.controller_guess
    }

    pub fn thinks_fenced(&self) -> bool {
        self.fenced
    }

    /// (Re)starts with a new incarnation: it must register again.
    pub fn start(&mut self) {
        self.up = true;
        self.incarnations += 1;
        self.epoch = None;
        self.fenced = true;
        self.metadata_offset = -1;
        self.in_flight_since_ms = None;
    }

    pub fn crash(&mut self) {
        self.up = false;
        self.in_flight_since_ms = None;
    }

    /// A crash that takes the data directory with it: the next registration is an unclean one.
    pub fn wipe(&mut self) {
        self.crash();
        self.recorded_epoch = -1;
    }

    fn incarnation_id(&self) -> Uuid128 {
        Uuid128 {
            high: self.id as u64,
            low: self.incarnations,
        }
    }

    fn next_guess(&mut self) {
        self.controller_guess = 1 + (self.controller_guess % self.controllers);
    }

    /// The heartbeat timer fired: send a registration or a heartbeat, unless one is in flight.
    pub fn tick(&mut self, now_ms: u64) -> Option<Envelope> {
        if !self.up {
            return None;
        }
        if let Some(since) = self.in_flight_since_ms {
            if now_ms.saturating_sub(since) < REQUEST_TIMEOUT_MS {
                return None;
            }
            self.next_guess();
        }
        self.in_flight_since_ms = Some(now_ms);
        let payload = match self.epoch {
            None => Payload::Register {
                broker_id: self.id,
                incarnation_id: self.incarnation_id(),
                previous_broker_epoch: self.recorded_epoch,
            },
            Some(broker_epoch) => Payload::Heartbeat(HeartbeatRequest {
                broker_id: self.id,
                broker_epoch,
                current_metadata_offset: self.metadata_offset,
                want_fence: false,
                want_shutdown: false,
            }),
        };
        Some(Envelope::new(
            Endpoint::Broker(self.id),
            Endpoint::Node(self.controller_guess),
            payload,
        ))
    }

    /// An answer from a controller node.
    pub fn on_answer(&mut self, payload: &Payload) {
        if !self.up {
            return;
        }
        self.in_flight_since_ms = None;
        let (error, leader_hint) = match payload {
            Payload::RegisterAnswer {
                error,
                broker_epoch,
                leader_hint,
                incarnation_id,
            } => {
                if *incarnation_id != self.incarnation_id() {
                    // An answer to a previous incarnation (this one restarted since).
                    return;
                }
                if *error == ErrorCode::None && self.epoch.is_none() {
                    self.epoch = Some(*broker_epoch);
                    self.recorded_epoch = *broker_epoch;
                    self.fenced = true;
                }
                (*error, *leader_hint)
            }
            Payload::HeartbeatAnswer {
                broker_epoch,
                error,
                fenced,
                metadata_offset,
                leader_hint,
                ..
            } => {
                if Some(*broker_epoch) != self.epoch {
                    // An answer to an earlier registration's heartbeat.
                    return;
                }
                match error {
                    ErrorCode::None => {
                        self.fenced = *fenced;
                        self.metadata_offset = self.metadata_offset.max(*metadata_offset);
                    }
                    ErrorCode::StaleBrokerEpoch | ErrorCode::BrokerNotAvailable => {
                        self.epoch = None;
                        self.fenced = true;
                    }
                    _ => {}
                }
                (*error, *leader_hint)
            }
            _ => return,
        };
        if error == ErrorCode::NotController {
            if leader_hint != 0 {
                self.controller_guess = leader_hint;
            } else {
                self.next_guess();
            }
        }
    }
}
