//! The cluster half of `spool serve`'s configuration (DESIGN §7): who votes in the controller
//! quorum (`--controller-voters`, Kafka's `controller.quorum.voters` form `ID@HOST:PORT,...`),
//! where this broker listens for other brokers (`--internal-port`), its rack, and the broker
//! session timings. Parsed and validated once at start-up, with messages naming the flag.
//!
//! Without `--controller-voters` a broker is a single voter of its own quorum, exactly as on one
//! node: zero configuration keeps working.

/// One controller voter: its node id and internal address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Voter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}:{}", self.node_id, self.host, self.port)
    }
}

/// Most voters a quorum may name (raft's cost grows with every voter; Kafka runs 3 or 5).
pub const VOTERS_MAX: usize = 9;
/// The broker session's defaults (250 ms heartbeats, fenced after 1500 ms without one: a new
/// leader within 2 s of a broker's death), decided in `spool-core`.
pub use spool_core::liveness::{
    BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT, BROKER_SESSION_TIMEOUT_MS_DEFAULT,
};

/// How long a stopping broker waits for the controller to move its leaderships away before it
/// stops anyway (`--controlled-shutdown-timeout-ms`). Kafka's broker too waits a bounded while
/// for its controlled shutdown and then stops regardless. A handoff takes a heartbeat and a
/// metadata commit, well under a second while a controller quorum is up: the bound only matters
/// when none is (the last brokers of a cluster stopping), and then it is how long they wait.
pub const CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT: u64 = 30_000;

/// Applied metadata records between snapshots of the image (raft-rs compacts the log behind
/// each one).
pub const METADATA_SNAPSHOT_ENTRIES_DEFAULT: u64 = 1024;

/// Parses `--controller-voters`: `ID@HOST:PORT` entries separated by commas, distinct ids and
/// addresses.
pub fn parse_voters(s: &str) -> Result<Vec<Voter>, String> {
    let mut voters: Vec<Voter> = Vec::new();
    for entry in s.split(',').map(str::trim) {
        let bad = |why: &str| {
            format!("--controller-voters: {entry:?} is not ID@HOST:PORT ({why}); e.g. 1@127.0.0.1:9094,2@127.0.0.2:9094,3@127.0.0.3:9094")
        };
        let (id, addr) = entry.split_once('@').ok_or_else(|| bad("no '@'"))?;
        let node_id: i32 = id.parse().map_err(|_| bad("the id is not a number"))?;
        if node_id < 0 {
            return Err(bad("the id is negative"));
        }
        let (host, port) = addr.rsplit_once(':').ok_or_else(|| bad("no ':PORT'"))?;
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        if host.is_empty() || port == 0 {
            return Err(bad("empty host or port 0"));
        }
        if voters.iter().any(|v| v.node_id == node_id) {
            return Err(format!("--controller-voters names node {node_id} twice"));
        }
        if voters.iter().any(|v| v.host == host && v.port == port) {
            return Err(format!("--controller-voters names {host}:{port} twice"));
        }
        voters.push(Voter {
            node_id,
            host: host.to_string(),
            port,
        });
    }
    if voters.len() > VOTERS_MAX {
        return Err(format!(
            "--controller-voters names {} voters; at most {VOTERS_MAX}",
            voters.len()
        ));
    }
    Ok(voters)
}

/// The controller's raft id of a node (raft reserves 0, node ids start at 0), and back; decided
/// in spool-raft so the controller can add registered brokers as learners.
pub use spool_raft::{broker_of_raft_id as node_of_raft_id, raft_id_of_broker as raft_id};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafkas_voter_form() {
        let v = parse_voters("1@127.0.0.1:9094, 2@127.0.0.2:9094,3@localhost:19094").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[2].to_string(), "3@localhost:19094");
        assert_eq!(raft_id(0), 1);
        assert_eq!(node_of_raft_id(raft_id(7)), Some(7));
        assert_eq!(node_of_raft_id(0), None);
    }

    #[test]
    fn refuses_bad_voters_naming_the_flag() {
        for bad in [
            "",
            "1",
            "1@host",
            "x@h:1",
            "-1@h:1",
            "1@h:0",
            "1@:9094",
            "1@h:1,1@g:2",
            "1@h:1,2@h:1",
            "1@h:99999",
        ] {
            let e = parse_voters(bad).unwrap_err();
            assert!(e.contains("--controller-voters"), "{bad}: {e}");
        }
        let many: Vec<String> = (0..10).map(|i| format!("{i}@h:{}", 9000 + i)).collect();
        assert!(parse_voters(&many.join(",")).is_err());
    }
}
