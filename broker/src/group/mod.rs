//! Consumer groups on the broker (DESIGN §8). The decisions — the group state machine, one core's
//! coordinator, the `__consumer_offsets` record layout — are `spool_core::group` (re-exported
//! here, so `crate::group::GroupCall` names the same type everywhere); [`driver`] is the glommio
//! side that feeds it requests and time and appends the records it asks for.

pub mod driver;

pub use spool_core::group::*;
