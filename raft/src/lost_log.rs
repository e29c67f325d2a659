//! A metadata voter back without its log: a wiped or replaced data dir (or a brand-new node),
//! which raft itself assumes never happens — raft-rs panics when a leader's heartbeat names a
//! commit index past the follower's log ("to_commit … is out of range"), a leader ignores the
//! follower's rejections as stale forever (they fall below what it had matched), and an empty
//! voter grants its vote to any candidate, so with its vote a candidate missing committed
//! entries could win and overwrite them on the one voter left holding them. The fault harness
//! found the first two (`tests/faults.sh`, the `wipe` nemesis: the wiped voter's raft thread
//! panicked and the quorum never agreed on a controller again).
//!
//! Owns three rules, applied by [`crate::MetadataRaft::step`] to each message before raft-rs
//! sees it:
//! - **No panic** ([`clamp_heartbeat_commit`]): a heartbeat's commit index is cut to this node's
//!   log end (it only tells a follower how far it may commit, never what it holds); the node
//!   learns that it lost entries it had acknowledged and tells the leader at once
//!   ([`lost_entries_reply`]).
//! - **Catch up before voting** ([`CatchUp`]): a voter that starts with nothing persisted (no
//!   log, term 0) cannot know whether it held entries before, so it assumes it may have: until
//!   its commit index has reached the one the leader's appends name, it answers no vote or
//!   pre-vote and wins no pre-vote (it could elect, or be, a leader without them). Once it has
//!   heard every other voter with an empty log, the group is new and it votes at once, so a new
//!   group still elects (all its voters up: one that never starts holds the first election
//!   back). Until it has caught up it counts as a failed voter: a group of three needs both
//!   others to elect.
//!
//! The obligation is durable: the driver creates `__raft/catching-up` when it opens a fresh
//! directory, before raft can persist anything, passes it in as `RecoveredState::catching_up`,
//! and removes it once [`crate::MetadataRaft::is_catching_up`] turns false — so a wiped voter
//! that restarts again before it has caught up still owes the catch-up (the simulator's
//! `--voter-wipes` runs found that case while the obligation lived in memory only).
//! - **Leader forgets lost progress** ([`forget_lost_progress`]): a follower's rejection below
//!   what the leader had recorded as matched means the follower's log lost those entries; the
//!   leader lowers its record to the follower's log end and probes from there (or sends a
//!   snapshot), instead of discarding the rejection as stale.
//!
//! Departure from raft-rs's contract: [`forget_lost_progress`] lowers `Progress::matched`, which
//! raft-rs only ever raises. Lowering it can only slow the commit index (which never moves
//! back), and it is what the follower now holds.

use std::collections::BTreeSet;

use raft::eraftpb::{Message, MessageType};
use raft::{ProgressState, Raft, Storage};

/// Cuts a heartbeat's commit index to `last_index` (this node's log end). Returns the commit
/// index the leader named when it was past the log end — this node lost entries it had
/// acknowledged — and `None` otherwise.
pub fn clamp_heartbeat_commit(m: &mut Message, last_index: u64) -> Option<u64> {
    if m.get_msg_type() != MessageType::MsgHeartbeat || m.commit <= last_index {
        return None;
    }
    let named = m.commit;
    m.commit = last_index;
    Some(named)
}

/// Marks a [`lost_entries_reply`] (raft-rs leaves an append answer's context unused).
const LOST_ENTRIES_CONTEXT: &[u8] = b"spool:lost-entries";

/// What a follower whose log lost acknowledged entries tells its leader right away: a rejection
/// of an append at `named` (the commit index the leader claimed it holds) with its log end as
/// the hint, which [`forget_lost_progress`] acts on. Without it a leader with nothing new to
/// send would keep counting the follower as holding everything (raft-rs sends appends on a
/// heartbeat answer only to followers it thinks are behind).
pub fn lost_entries_reply(
    leader: u64,
    from: u64,
    term: u64,
    named: u64,
    last_index: u64,
) -> Message {
    let mut m = Message::default();
    m.set_context(bytes::Bytes::from_static(LOST_ENTRIES_CONTEXT));
    m.set_msg_type(MessageType::MsgAppendResponse);
    m.to = leader;
    m.from = from;
    m.term = term;
    m.reject = true;
    m.index = named;
    m.reject_hint = last_index;
    m
}

/// Whether `m` shows the group has a log: a position, a commit index, entries or a snapshot.
fn shows_history(m: &Message) -> bool {
    m.index > 0 || m.log_term > 0 || m.commit > 0 || !m.entries.is_empty() || m.has_snapshot()
}

/// Whether `m` says where its sender's log stands (a heartbeat does not: its commit index is
/// capped by what the leader thinks this node holds).
fn tells_log_position(m: &Message) -> bool {
    matches!(
        m.get_msg_type(),
        MessageType::MsgRequestVote
            | MessageType::MsgRequestPreVote
            | MessageType::MsgRequestVoteResponse
            | MessageType::MsgRequestPreVoteResponse
            | MessageType::MsgAppend
            | MessageType::MsgSnapshot
    )
}

/// A voter that has never persisted anything (or found it lost acknowledged entries), until it
/// has caught up (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// The other voters.
    others: BTreeSet<u64>,
    /// Voters whose log position this node has heard, all empty so far.
    heard_empty: BTreeSet<u64>,
    /// Some voter's message showed a log: the group is not new.
    history_seen: bool,
    /// The commit index it must reach: the highest a leader's append has named to it.
    target: Option<u64>,
}

impl CatchUp {
    /// A voter starting with nothing persisted, among `others`.
    pub fn fresh(others: impl IntoIterator<Item = u64>) -> Self {
        Self {
            others: others.into_iter().collect(),
            ..Self::default()
        }
    }

    /// The node lost entries through `commit` (a clamped heartbeat named it): the group has
    /// history, and this node must reach `commit` before it votes.
    pub fn lost_through(&mut self, commit: u64) {
        self.history_seen = true;
        self.raise(commit);
    }

    fn raise(&mut self, commit: u64) {
        self.target = Some(self.target.map_or(commit, |t| t.max(commit)));
    }

    /// Every other voter was heard with an empty log: the group is new, nothing was ever
    /// committed, and this node has nothing to catch up.
    fn group_is_new(&self) -> bool {
        !self.history_seen && self.heard_empty.is_superset(&self.others)
    }

    /// Learns from `m`, then says whether it may be stepped. While the group may have history
    /// this node answers no vote or pre-vote (its vote could elect a candidate without entries
    /// it once held, and even a pre-vote grant lets such a candidate campaign and depose a sound
    /// leader with its higher term, again and again) and wins no pre-vote (it would campaign
    /// with a log that may lack committed entries). Dropping those is what a lossy network
    /// does; raft retries.
    pub fn admit(&mut self, m: &Message) -> bool {
        if self.others.contains(&m.from) {
            if shows_history(m) {
                self.history_seen = true;
            } else if tells_log_position(m) {
                self.heard_empty.insert(m.from);
            }
        }
        match m.get_msg_type() {
            MessageType::MsgAppend => self.raise(m.commit),
            MessageType::MsgSnapshot => {
                self.raise(m.get_snapshot().get_metadata().index.max(m.commit))
            }
            _ => {}
        }
        let votes_for_someone = matches!(
            m.get_msg_type(),
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote
        );
        let grants_this_node =
            m.get_msg_type() == MessageType::MsgRequestPreVoteResponse && !m.reject;
        !(votes_for_someone || grants_this_node) || self.group_is_new()
    }

    /// Whether a node whose commit index is `committed` has caught up.
    pub fn caught_up(&self, committed: u64) -> bool {
        self.group_is_new() || self.target.is_some_and(|t| committed >= t)
    }

    /// The commit index it waits for, if known (for logs).
    pub fn target(&self) -> Option<u64> {
        self.target
    }
}

/// On the leader: a follower's append rejection naming a log end below what the leader has it
/// as matched (module docs). Returns the follower and its new matched index when it reset one.
pub fn forget_lost_progress<T: Storage>(raft: &mut Raft<T>, m: &Message) -> Option<(u64, u64)> {
    if m.get_msg_type() != MessageType::MsgAppendResponse || !m.reject {
        return None;
    }
    let pr = raft.mut_prs().get_mut(m.from)?;
    // Only the follower's explicit reply counts: raft-rs's own rejections hint below `matched`
    // in ordinary runs too (its hint walks back by term; the fault harness saw it on healthy
    // followers), and acting on those would only churn the leader's progress.
    if m.get_context() != LOST_ENTRIES_CONTEXT || m.reject_hint >= pr.matched {
        return None;
    }
    pr.matched = m.reject_hint;
    // From Replicate (or a finished Snapshot) to Probe: the next append starts right after the
    // follower's log end; raft-rs sends a snapshot if the log no longer reaches back that far.
    if pr.state == ProgressState::Snapshot {
        pr.pending_snapshot = 0;
    }
    pr.become_probe();
    Some((m.from, m.reject_hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(t: MessageType) -> Message {
        let mut m = Message::default();
        m.set_msg_type(t);
        m
    }

    fn from(t: MessageType, id: u64) -> Message {
        let mut m = message(t);
        m.from = id;
        m
    }

    #[test]
    fn a_heartbeat_past_the_log_end_is_cut_to_it_and_says_so() {
        let mut m = message(MessageType::MsgHeartbeat);
        m.commit = 121;
        assert_eq!(clamp_heartbeat_commit(&mut m, 0), Some(121));
        assert_eq!(m.commit, 0);
        let mut m = message(MessageType::MsgHeartbeat);
        m.commit = 5;
        assert_eq!(clamp_heartbeat_commit(&mut m, 5), None);
        assert_eq!(m.commit, 5);
        let mut m = message(MessageType::MsgAppend);
        m.commit = 9;
        assert_eq!(clamp_heartbeat_commit(&mut m, 0), None, "only heartbeats");
        assert_eq!(m.commit, 9);
    }

    #[test]
    fn a_fresh_voter_of_a_new_group_votes_once_it_has_heard_every_other_empty() {
        let mut c = CatchUp::fresh([2, 3]);
        assert!(
            !c.admit(&from(MessageType::MsgRequestPreVote, 2)),
            "not yet heard from 3"
        );
        assert!(
            !c.admit(&from(MessageType::MsgRequestVote, 2)),
            "not yet heard from 3"
        );
        assert!(!c.admit(&from(MessageType::MsgRequestPreVoteResponse, 2)));
        assert!(
            c.admit(&from(MessageType::MsgRequestPreVoteResponse, 3)),
            "3 is empty too: the group is new"
        );
        assert!(c.admit(&from(MessageType::MsgRequestVote, 2)));
        assert!(c.admit(&from(MessageType::MsgRequestPreVote, 3)));
        assert!(c.caught_up(0));
    }

    #[test]
    fn a_fresh_voter_of_a_group_with_history_votes_only_once_it_has_caught_up() {
        let mut c = CatchUp::fresh([2, 3]);
        let mut with_log = from(MessageType::MsgRequestPreVote, 2);
        with_log.index = 5;
        assert!(!c.admit(&with_log), "2 may lack what this node once held");
        assert!(
            !c.admit(&from(MessageType::MsgRequestPreVoteResponse, 3)),
            "it must not win a pre-vote"
        );
        assert!(
            !c.admit(&from(MessageType::MsgRequestVote, 3)),
            "3 may lack what 2 has"
        );
        assert!(
            !c.caught_up(1_000),
            "no leader has named a commit index yet"
        );
        let mut append = from(MessageType::MsgAppend, 2);
        append.commit = 121;
        append.index = 120;
        assert!(c.admit(&append));
        assert!(c.admit(&from(MessageType::MsgHeartbeat, 2)));
        assert_eq!(
            c.target(),
            Some(121),
            "a heartbeat's commit never lowers it"
        );
        assert!(!c.caught_up(120));
        assert!(c.caught_up(121));
        let mut refusal = from(MessageType::MsgRequestPreVoteResponse, 2);
        refusal.reject = true;
        assert!(c.admit(&refusal), "a refusal changes nothing");
    }

    #[test]
    fn a_voter_that_lost_acknowledged_entries_waits_for_them() {
        let mut c = CatchUp::fresh([2, 3]);
        c.lost_through(40);
        assert!(!c.caught_up(39));
        assert!(c.caught_up(40));
        assert!(!c.admit(&from(MessageType::MsgRequestVote, 2)));
    }
}
