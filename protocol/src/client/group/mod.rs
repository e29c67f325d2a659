//! Consumer groups on the client side: Kafka's ConsumerProtocol bytes ([`protocol`]), the
//! assignors the group leader runs ([`assignor`]), the member's sans-IO core ([`member`]), and
//! the rebalance listener with the glue that applies the member's events to the fetching core
//! ([`listener`]). `Consumer::subscribe` (blocking) drives the member and the fetching core over
//! one set of connections.
//!
//! Like every client core, nothing here touches a socket or a clock.

pub mod assignor;
pub(crate) mod both;
pub mod listener;
pub mod member;
pub mod protocol;
pub(crate) mod requests;

pub use assignor::Assignor;
pub use listener::{NoListener, RebalanceListener};
pub use member::{CommitKind, GroupCore, GroupEvent};
