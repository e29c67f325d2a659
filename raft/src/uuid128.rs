//! [`Uuid128`]: the 128-bit id the metadata uses for topics (Kafka's topic UUID) and broker
//! incarnations, and its conversions to and from the flatbuffers `Uuid` struct.
//!
//! Owns: the value type only. It sits below both [`crate::image`] (which stores ids) and
//! [`crate::records`] (which writes them into records), so neither has to import the other.
//! Never does: make ids — the controller makes new topic ids ([`crate::controller`]).

// Default-then-assign is the only way to build flatc's `#[non_exhaustive]` `UuidT` from another
// crate.
#![allow(clippy::field_reassign_with_default)]

use spool_protocol::metadata_records::UuidT;

/// A 128-bit id: a topic's id (Kafka's topic UUID) or a broker's incarnation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Uuid128 {
    pub high: u64,
    pub low: u64,
}

impl Uuid128 {
    pub const ZERO: Uuid128 = Uuid128 { high: 0, low: 0 };

    pub fn is_zero(self) -> bool {
        self == Self::ZERO
    }

    /// 32 lowercase hex digits (how cluster ids are shown and sent between brokers).
    pub fn to_hex(self) -> String {
        format!("{:016x}{:016x}", self.high, self.low)
    }

    /// The inverse of [`Uuid128::to_hex`]; `None` for anything but 32 hex digits.
    pub fn parse_hex(s: &str) -> Option<Self> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Uuid128 {
            high: u64::from_str_radix(&s[..16], 16).ok()?,
            low: u64::from_str_radix(&s[16..], 16).ok()?,
        })
    }

    /// The 16 bytes of the id, `high` first, each half big-endian (Kafka's UUID layout, and the
    /// order [`Uuid128::to_hex`] prints): how the internal protocol carries topic ids.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut out = [0; 16];
        out[..8].copy_from_slice(&self.high.to_be_bytes());
        out[8..].copy_from_slice(&self.low.to_be_bytes());
        out
    }

    /// The inverse of [`Uuid128::to_bytes`].
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        let [h0, h1, h2, h3, h4, h5, h6, h7, l0, l1, l2, l3, l4, l5, l6, l7] = bytes;
        Uuid128 {
            high: u64::from_be_bytes([h0, h1, h2, h3, h4, h5, h6, h7]),
            low: u64::from_be_bytes([l0, l1, l2, l3, l4, l5, l6, l7]),
        }
    }

    /// The flatbuffers form written into metadata records.
    pub fn to_uuid(self) -> UuidT {
        let mut u = UuidT::default();
        u.high = self.high;
        u.low = self.low;
        u
    }
}

impl From<&UuidT> for Uuid128 {
    fn from(u: &UuidT) -> Self {
        Uuid128 {
            high: u.high,
            low: u.low,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_record_form() {
        let id = Uuid128 {
            high: 0x0123_4567_89ab_cdef,
            low: 0xfedc_ba98_7654_3210,
        };
        let u = id.to_uuid();
        assert_eq!((u.high, u.low), (id.high, id.low));
        assert_eq!(Uuid128::from(&u), id);
        assert!(!id.is_zero());
        assert!(Uuid128::default().is_zero());
        assert_eq!(id.to_hex(), "0123456789abcdeffedcba9876543210");
        assert_eq!(Uuid128::parse_hex(&id.to_hex()), Some(id));
        let bytes = id.to_bytes();
        assert_eq!(
            (bytes[0], bytes[7], bytes[8], bytes[15]),
            (0x01, 0xef, 0xfe, 0x10)
        );
        assert_eq!(Uuid128::from_bytes(bytes), id);
        for bad in [
            "",
            "0123",
            "0123456789abcdeffedcba987654321g",
            "+123456789abcdeffedcba9876543210",
        ] {
            assert_eq!(Uuid128::parse_hex(bad), None, "{bad}");
        }
    }
}
