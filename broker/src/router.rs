//! The router at the bottom of the broker (DESIGN §4): the core's mesh handles, the shard map
//! (which core owns which partition), and typed calls to another core.
//!
//! [`Router::call`] runs a request on its owner: a direct call when the owner is this core, a
//! mesh round trip otherwise (request tagged with an id, the reply matched back to its waiting
//! caller). Calls are typed by [`crate::calls`]: the reply type is the request's. Mesh channels are
//! bounded (1024, DESIGN §12), so a slow core back-pressures its senders; every message owns its
//! data (`Send`), so no core lends another its `Rc`s.
//!
//! Knows no services: what answers a call is the [`Services`] the caller passes in (the shard, for
//! a call to itself) and the one [`Router::spawn_receivers`] was given (for calls from others).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use glommio::channels::channel_mesh::{Receivers, Senders};
use glommio::channels::local_channel::{self, LocalSender};
use spool_core::shard_map::ShardMap;

use crate::calls::{self, Call, Reply, Request, Services};
use crate::requests::TopicPartition;

/// Channel capacity between two cores.
pub const MESH_CHANNEL_CAPACITY: usize = 1024;

/// What travels on the mesh.
pub enum Envelope {
    Request {
        from: usize,
        id: u64,
        request: Request,
    },
    Reply {
        id: u64,
        reply: Reply,
    },
}

/// Why a call got no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("core {core} is not reachable")]
    Unreachable { core: usize },
    #[error("core {core} dropped the request (shutting down)")]
    Dropped { core: usize },
    /// Only if the call catalogue itself were wrong (a reply of another call's kind).
    #[error("core {core} answered with a reply of another kind")]
    Mismatch { core: usize },
}

pub struct Router {
    core: usize,
    cores: usize,
    senders: Senders<Envelope>,
    pending: RefCell<HashMap<u64, LocalSender<Reply>>>,
    next_id: Cell<u64>,
    shard_map: RefCell<ShardMap>,
}

impl Router {
    pub fn new(senders: Senders<Envelope>, cores: usize) -> Self {
        Self {
            core: senders.peer_id(),
            cores,
            senders,
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            shard_map: RefCell::new(ShardMap::new(cores)),
        }
    }

    /// This core's index on the mesh.
    pub fn core(&self) -> usize {
        self.core
    }

    pub fn cores(&self) -> usize {
        self.cores
    }

    /// The core that owns `tp`, once the partition was assigned.
    pub fn owner(&self, tp: &TopicPartition) -> Option<usize> {
        self.shard_map.borrow().owner(tp)
    }

    /// Assigns `tp` to a core (idempotent; every core computes the same map from the same
    /// committed records in the same order).
    pub fn assign(&self, tp: &TopicPartition) -> usize {
        self.shard_map.borrow_mut().assign(tp)
    }

    pub fn unassign(&self, tp: &TopicPartition) {
        self.shard_map.borrow_mut().remove(tp);
    }

    /// Runs `request` on `core` (on `local` when that is this core) and returns its reply.
    pub async fn call<S: Services, C: Call>(
        &self,
        local: &Rc<S>,
        core: usize,
        request: C,
    ) -> Result<C::Reply, RouteError> {
        if core == self.core {
            // Boxed: a service may itself call another core, so the future type is recursive.
            return Ok(Box::pin(request.serve(local)).await);
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = local_channel::new_bounded(1);
        self.pending.borrow_mut().insert(id, tx);
        let envelope = Envelope::Request {
            from: self.core,
            id,
            request: request.into_request(),
        };
        if self.senders.send_to(core, envelope).await.is_err() {
            self.pending.borrow_mut().remove(&id);
            return Err(RouteError::Unreachable { core });
        }
        let reply = rx.recv().await.ok_or(RouteError::Dropped { core })?;
        C::from_reply(reply).ok_or_else(|| {
            debug_assert!(false, "call catalogue mismatch from core {core}");
            RouteError::Mismatch { core }
        })
    }

    /// Runs a request on every core (this one included), concurrently; replies in core order.
    pub async fn broadcast<S: Services, C: Call>(
        self: &Rc<Self>,
        local: &Rc<S>,
        make: impl Fn() -> C,
    ) -> Vec<Result<C::Reply, RouteError>> {
        let calls: Vec<_> = (0..self.cores)
            .map(|core| {
                let (me, local, request) = (Rc::clone(self), Rc::clone(local), make());
                glommio::spawn_local(async move { me.call(&local, core, request).await })
            })
            .collect();
        let mut out = Vec::with_capacity(calls.len());
        for c in calls {
            out.push(c.await);
        }
        out
    }

    /// Serves what arrives from the other cores with `services`, until they hang up: each
    /// request on its own task, each reply handed to its waiting caller.
    pub fn spawn_receivers<S: Services>(
        self: &Rc<Self>,
        mut receivers: Receivers<Envelope>,
        services: Rc<S>,
    ) {
        for (_, stream) in receivers.streams() {
            let (me, services) = (Rc::clone(self), Rc::clone(&services));
            glommio::spawn_local(async move {
                while let Some(envelope) = stream.recv().await {
                    match envelope {
                        Envelope::Request { from, id, request } => {
                            let (me, services) = (Rc::clone(&me), Rc::clone(&services));
                            glommio::spawn_local(async move {
                                let reply = calls::serve(&services, request).await;
                                let _ = me
                                    .senders
                                    .send_to(from, Envelope::Reply { id, reply })
                                    .await;
                            })
                            .detach();
                        }
                        Envelope::Reply { id, reply } => {
                            let tx = me.pending.borrow_mut().remove(&id);
                            if let Some(tx) = tx {
                                let _ = tx.try_send(reply);
                            }
                        }
                    }
                }
            })
            .detach();
        }
    }
}

/// The broker leading `tp` in `image` and the core owning `tp` on every broker; None while it
/// has no leader or no core yet.
pub fn leader_and_owner(
    image: &spool_raft::MetadataImage,
    router: &Router,
    tp: &TopicPartition,
) -> Option<(i32, usize)> {
    let leader = image
        .topic(&tp.topic)
        .and_then(|t| {
            t.partitions
                .get(usize::try_from(tp.partition).ok()?)
                .map(|p| p.leader)
        })
        .filter(|&l| l >= 0)?;
    Some((leader, router.owner(tp)?))
}
