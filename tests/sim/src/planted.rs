//! [`PlantedBug`]: bugs compiled into the simulator's own driver on purpose, to prove the checker
//! fails when the code it watches is wrong.
//!
//! Owns: the names `--planted-bug` accepts and what each one breaks.
//! Promises: with no planted bug selected (the default) the driver follows
//! `spool_raft::Controller`'s order of operations exactly; each planted bug changes only the
//! driver in [`crate::node`] — never spool-raft, spool-core or any production crate.
//! Never does: plant anything in the code under test.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlantedBug {
    /// The driver advances raft — sending the votes and append acknowledgements that raft only
    /// allows once the state is durable — before its fsync completes. A crash in that window
    /// loses a vote or an entry the node already acknowledged.
    AckBeforePersist,
    /// The driver never fsyncs the raft log or hard state (only the incarnation, on open), so a
    /// power loss may drop everything the node ever acknowledged.
    SkipFsync,
}

impl PlantedBug {
    pub const ALL: [PlantedBug; 2] = [PlantedBug::AckBeforePersist, PlantedBug::SkipFsync];

    pub fn name(self) -> &'static str {
        match self {
            PlantedBug::AckBeforePersist => "ack-before-persist",
            PlantedBug::SkipFsync => "skip-fsync",
        }
    }
}

impl fmt::Display for PlantedBug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlantedBug {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PlantedBug::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = PlantedBug::ALL.iter().map(|b| b.name()).collect();
                format!("unknown planted bug {s:?}; known: {}", names.join(", "))
            })
    }
}
