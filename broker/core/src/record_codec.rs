//! The primitives of Kafka's internal-topic records (`__consumer_offsets`,
//! `__transaction_state`): big-endian integers, `str` (an i16 length and UTF-8 bytes), `nstr`
//! (the same with -1 for null) and `bytes` (an i32 length). Reading never panics: every length
//! is checked against the bytes left, and anything else is a [`RecordError`].

use bytes::{BufMut, BytesMut};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record ends early: {0}")]
    Truncated(&'static str),
    #[error("unknown key version {0}")]
    KeyVersion(i16),
    #[error("unknown value version {0}")]
    ValueVersion(i16),
    #[error("bad {0}")]
    Malformed(&'static str),
}

pub(crate) fn put_str(out: &mut BytesMut, s: &str) {
    // Strings longer than i16::MAX cannot be written; callers bound them (group ids, topic names
    // and metadata are all checked far below that), so this cut never happens in practice.
    let b = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    out.put_i16(b.len() as i16);
    out.put_slice(b);
}

pub(crate) fn put_nstr(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.put_i16(-1),
    }
}

pub(crate) fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        if self.buf.len() < n {
            return Err(RecordError::Truncated(what));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    pub(crate) fn i8(&mut self, what: &'static str) -> Result<i8, RecordError> {
        Ok(self.take(1, what)?[0] as i8)
    }
    pub(crate) fn i16(&mut self, what: &'static str) -> Result<i16, RecordError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, RecordError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, RecordError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(i64::from_be_bytes(a))
    }
    pub(crate) fn nstr(&mut self, what: &'static str) -> Result<Option<String>, RecordError> {
        let len = self.i16(what)?;
        if len < 0 {
            return Ok(None);
        }
        let b = self.take(len as usize, what)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| RecordError::Malformed(what))
    }
    pub(crate) fn str(&mut self, what: &'static str) -> Result<String, RecordError> {
        self.nstr(what)?.ok_or(RecordError::Malformed(what))
    }
    pub(crate) fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>, RecordError> {
        let len = self.i32(what)?;
        if len < 0 {
            return Ok(Vec::new());
        }
        Ok(self.take(len as usize, what)?.to_vec())
    }
}
