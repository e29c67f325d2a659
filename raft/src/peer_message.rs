//! Raft messages to and from bytes, for the broker's internal port (9094), so the broker need not
//! depend on protobuf itself.
//!
//! Promises: decoding never panics. raft-rs's protobuf 2.28 carries RUSTSEC-2024-0437 (deep
//! recursion on hostile input): accept these bytes only from authenticated peers (DESIGN §12).

use protobuf::Message as _;
use raft::eraftpb::Message;

/// Encodes a raft message for a peer.
pub fn encode_message(message: &Message) -> Result<Vec<u8>, protobuf::ProtobufError> {
    message.write_to_bytes()
}

/// Decodes a raft message from a peer.
pub fn decode_message(bytes: &[u8]) -> Result<Message, protobuf::ProtobufError> {
    Message::parse_from_bytes(bytes)
}
