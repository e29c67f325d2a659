//! Transactions on the broker (DESIGN §9, issue 18). The decisions — the transaction state
//! machine, one core's coordinator, the `__transaction_state` record layout, a partition's open
//! and aborted transactions — are `spool_core::txn` (re-exported here); [`calls`] is what a
//! front asks a coordinator core, [`driver`] the glommio side that feeds the coordinator requests
//! and time, appends the records it asks for and hands marker work to the marker writer above
//! the shard (`crate::txn_markers`).

pub mod calls;
pub mod driver;

pub use spool_core::txn::*;
