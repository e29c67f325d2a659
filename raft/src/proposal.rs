//! [`ProposalId`]: who proposed a raft entry, carried in the entry's `context` so the proposer
//! can be answered when it commits.
//!
//! Owns: the 24-byte context format `node_id u64 | incarnation u64 | seq u64` (little-endian).
//! Promises: ids are unique across restarts because `incarnation` is bumped durably every time the
//! controller opens its directory (see [`crate::disk::state_file`]); decoding any bytes never
//! panics (a context of another shape is simply "not a proposal of ours").
//! Never does: I/O.

/// Identifies one proposal: the node that made it, that node's incarnation, and a sequence
/// number within the incarnation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProposalId {
    pub node_id: u64,
    pub incarnation: u64,
    pub seq: u64,
}

/// Bytes of an encoded [`ProposalId`].
pub const PROPOSAL_CONTEXT_BYTES: usize = 24;

impl ProposalId {
    pub fn to_context(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PROPOSAL_CONTEXT_BYTES);
        out.extend_from_slice(&self.node_id.to_le_bytes());
        out.extend_from_slice(&self.incarnation.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out
    }

    /// `None` for a context that is not exactly one encoded id (e.g. raft's empty entries).
    pub fn from_context(bytes: &[u8]) -> Option<ProposalId> {
        if bytes.len() != PROPOSAL_CONTEXT_BYTES {
            return None;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        Some(ProposalId {
            node_id: word(0),
            incarnation: word(1),
            seq: word(2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_shapes() {
        let id = ProposalId {
            node_id: 1,
            incarnation: u64::MAX,
            seq: 7,
        };
        assert_eq!(ProposalId::from_context(&id.to_context()), Some(id));
        assert_eq!(ProposalId::from_context(&[]), None);
        assert_eq!(ProposalId::from_context(&[0; 23]), None);
    }
}
