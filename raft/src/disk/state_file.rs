//! `__raft/state`: the raft hard state (term, vote, commit), the conf state (voters, learners)
//! and this directory's incarnation counter, in one small file replaced atomically.
//!
//! Format: `b"SPRS" | u32 version | frame(u64 incarnation | u32 hs length | HardState | ConfState)`
//! (frames: [`super::frame`]; messages: raft-rs's protobuf encoding).
//! Promises: a missing file reads as `None` (a fresh directory); a file that exists but fails its
//! magic, CRC or decoding is an error naming the file — never silently reset, because forgetting
//! a vote could let this node vote twice in one term.

use std::io::ErrorKind;
use std::path::Path;

use protobuf::Message as _;
use raft::eraftpb::{ConfState, HardState};

use super::atomic::write_atomically;
use super::error::DiskError;
use super::frame::{get_frame, put_frame};

const MAGIC: &[u8; 4] = b"SPRS";
const VERSION: u32 = 1;

/// Everything `__raft/state` holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersistedState {
    /// Bumped on every open; part of every proposal id.
    pub incarnation: u64,
    pub hard_state: HardState,
    pub conf_state: ConfState,
}

pub fn read_state(path: &Path) -> Result<Option<PersistedState>, DiskError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DiskError::io("read", path)(e)),
    };
    decode_state(&bytes)
        .map(Some)
        .map_err(|(position, reason)| DiskError::corrupt(path, position, reason))
}

fn decode_state(bytes: &[u8]) -> Result<PersistedState, (u64, String)> {
    if bytes.get(..4) != Some(MAGIC.as_slice()) {
        return Err((0, "bad magic".into()));
    }
    if bytes.get(4..8) != Some(VERSION.to_le_bytes().as_slice()) {
        return Err((4, "unknown version".into()));
    }
    let (payload, total) = get_frame(&bytes[8..]).map_err(|f| (8, format!("{f:?}")))?;
    if 8 + total != bytes.len() {
        return Err(((8 + total) as u64, "bytes after the state frame".into()));
    }
    let word = payload.get(..8).ok_or((8, "short state".to_string()))?;
    let incarnation = u64::from_le_bytes(
        word.try_into()
            .map_err(|_| (8u64, "short state".to_string()))?,
    );
    let hs_len_bytes = payload.get(8..12).ok_or((16, "short state".to_string()))?;
    let hs_len = u32::from_le_bytes(
        hs_len_bytes
            .try_into()
            .map_err(|_| (16u64, "short state".to_string()))?,
    ) as usize;
    let hs_bytes = 12usize
        .checked_add(hs_len)
        .and_then(|end| payload.get(12..end))
        .ok_or((20, "hard state length past the frame".to_string()))?;
    let hard_state =
        HardState::parse_from_bytes(hs_bytes).map_err(|e| (20, format!("hard state: {e}")))?;
    let cs_bytes = &payload[12 + hs_len..];
    let conf_state = ConfState::parse_from_bytes(cs_bytes)
        .map_err(|e| ((20 + hs_len) as u64, format!("conf state: {e}")))?;
    Ok(PersistedState {
        incarnation,
        hard_state,
        conf_state,
    })
}

pub fn encode_state(state: &PersistedState) -> Result<Vec<u8>, protobuf::ProtobufError> {
    let hs = state.hard_state.write_to_bytes()?;
    let cs = state.conf_state.write_to_bytes()?;
    let mut payload = Vec::with_capacity(12 + hs.len() + cs.len());
    payload.extend_from_slice(&state.incarnation.to_le_bytes());
    // A HardState is three varints: far below 4 GiB.
    payload.extend_from_slice(&(hs.len() as u32).to_le_bytes());
    payload.extend_from_slice(&hs);
    payload.extend_from_slice(&cs);
    let mut out = Vec::with_capacity(payload.len() + 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    put_frame(&mut out, &payload);
    Ok(out)
}

/// Replaces the state file atomically and durably.
pub fn write_state(path: &Path, state: &PersistedState) -> Result<(), DiskError> {
    let bytes =
        encode_state(state).map_err(|e| DiskError::corrupt(path, 0, format!("encode: {e}")))?;
    write_atomically(path, &bytes).map_err(DiskError::io("replace", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let mut s = PersistedState {
            incarnation: 9,
            ..Default::default()
        };
        s.hard_state.term = 3;
        s.hard_state.vote = 1;
        s.hard_state.commit = 42;
        s.conf_state.voters = vec![1, 2, 3];
        let bytes = encode_state(&s).unwrap();
        assert_eq!(decode_state(&bytes), Ok(s));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(decode_state(&bad).is_err(), "flip at {i} went unnoticed");
            assert!(decode_state(&bytes[..i]).is_err());
        }
    }
}
