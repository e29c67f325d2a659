//! The async client API, on **glommio** — spool's runtime (DESIGN §4).
//!
//! Everything here must be created and used inside one glommio `LocalExecutor` (thread-per-core:
//! the futures are `!Send`, state lives in `Rc`/`RefCell`, connections are glommio `TcpStream`s on
//! that executor's io_uring). It drives the very same sans-IO cores as the blocking API:
//! - [`Producer`]: `send(..).await` queues a record, waiting (without blocking the thread) while
//!   the buffer is full; a spawned local task drives the core and the connections. The returned
//!   [`DeliveryFuture`] resolves to the record's partition and offset.
//! - [`Consumer`] and [`Admin`] drive their cores inside `poll(..).await` / `create_topics(..).await`;
//!   a subscribed consumer also has a heartbeat task that takes turns with those calls.
//!
//! Per connection, one local task reads and decodes response frames and forwards them over a
//! bounded local channel; writes happen on the driving task.

mod admin;
mod consumer;
mod heartbeat;
mod net;
mod producer;

pub use admin::Admin;
pub use consumer::Consumer;
pub use producer::Producer;

pub use crate::client::blocking::DeliveryFuture;
