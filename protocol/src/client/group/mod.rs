//! Consumer groups on the client side: Kafka's ConsumerProtocol bytes ([`protocol`]), the
//! assignors the group leader runs ([`assignor`]).
//!
//! Like every client core, nothing here touches a socket or a clock.

pub mod assignor;
pub mod member;
pub mod protocol;
mod requests;
