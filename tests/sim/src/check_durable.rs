//! Raft's persist-before-acknowledge rule, checked across restarts: what a node told its peers
//! must survive its crash.
//!
//! Owns: per node, the highest term it put on any message, the vote it granted in each term,
//! and the highest log index it acknowledged to the leader of its latest acknowledging term.
//! Promises (`acknowledged-is-durable`): when a node restarts, its recovered hard state has a
//! term at least as high as any it sent; if that is the term of a vote it granted, it recovered
//! that same vote; if it is the term of its last append acknowledgement, its recovered log
//! reaches the acknowledged index. (A leader of one term never shortens a follower's log, so
//! the acknowledgement stands until a higher term.)
//! Never does: judge the leader's own appends (leader completeness in [`crate::check_raft`]
//! covers those) or change a node.

use std::collections::BTreeMap;

use raft::eraftpb::{Message, MessageType};
use spool_raft::MetadataRaft;

use crate::violation::{Violation, ACKNOWLEDGED_IS_DURABLE};

#[derive(Debug, Default, Clone)]
struct Promises {
    term_max: u64,
    votes: BTreeMap<u64, u64>,
    /// `(term, index)` of the last successful append acknowledgement.
    acked: Option<(u64, u64)>,
}

#[derive(Default)]
pub struct DurableChecks {
    promises: BTreeMap<u64, Promises>,
}

impl DurableChecks {
    /// `node` lost its disk on purpose ([`crate::faults::Fault::Wipe`]): nothing it promised
    /// before can survive, so nothing is held against it; what the wipe may break instead
    /// (a second vote in a term, a leader without committed entries) is [`crate::check_raft`]'s.
    pub fn on_wiped(&mut self, node: u64) {
        self.promises.remove(&node);
    }

    /// A raft message `node` sent.
    pub fn on_sent(&mut self, node: u64, m: &Message) {
        let p = self.promises.entry(node).or_default();
        if matches!(
            m.get_msg_type(),
            MessageType::MsgRequestPreVote | MessageType::MsgRequestPreVoteResponse
        ) {
            // Pre-vote messages carry a term the node has not adopted.
            return;
        }
        p.term_max = p.term_max.max(m.term);
        match m.get_msg_type() {
            MessageType::MsgRequestVoteResponse if !m.reject => {
                p.votes.insert(m.term, m.to);
            }
            MessageType::MsgAppendResponse if !m.reject => {
                let acked = match p.acked {
                    Some((t, i)) if t == m.term => (t, i.max(m.index)),
                    Some((t, _)) if t > m.term => return,
                    _ => (m.term, m.index),
                };
                p.acked = Some(acked);
            }
            _ => {}
        }
    }

    /// `node` restarted with `raft` rebuilt from its disk.
    pub fn on_start(&mut self, node: u64, raft: &MetadataRaft) -> Result<(), Violation> {
        let Some(p) = self.promises.get(&node) else {
            return Ok(());
        };
        let hs = raft.log().hard_state();
        let fail = |why: String| {
            Err(Violation::new(
                ACKNOWLEDGED_IS_DURABLE,
                format!(
                    "n{node} restarted with term {} vote {} log end {}: {why}",
                    hs.term,
                    hs.vote,
                    raft.log().last()
                ),
            ))
        };
        if hs.term < p.term_max {
            return fail(format!("it had sent messages at term {}", p.term_max));
        }
        if let Some(&voted) = p.votes.get(&hs.term) {
            if hs.vote != voted {
                return fail(format!(
                    "it had granted its term-{} vote to n{voted}",
                    hs.term
                ));
            }
        }
        if let Some((term, index)) = p.acked {
            if term == hs.term && raft.log().last() < index {
                return fail(format!("it had acknowledged index {index} in term {term}"));
            }
        }
        Ok(())
    }
}
