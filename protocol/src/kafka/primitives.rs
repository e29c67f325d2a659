//! Kafka's non-flexible primitive types, read and written by hand for the versions the
//! `kafka-protocol` crate no longer carries ([`super::legacy`]).
//!
//! What it promises: every read checks the bytes left first and fails with a message, never a
//! panic; an array's claimed count is checked against the bytes left (every element is at least
//! one byte) and nothing is allocated from it — callers read elements one by one and push them.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;

/// A cursor over a request or response body.
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Self { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.remaining()
    }

    /// The bytes not read yet.
    pub fn into_rest(self) -> Bytes {
        self.buf
    }

    fn need(&self, bytes: usize, what: &str) -> Result<(), String> {
        if self.buf.remaining() < bytes {
            return Err(format!(
                "{what}: {bytes} bytes needed, {} left",
                self.buf.remaining()
            ));
        }
        Ok(())
    }

    pub fn i8(&mut self) -> Result<i8, String> {
        self.need(1, "int8")?;
        Ok(self.buf.get_i8())
    }

    pub fn bool(&mut self) -> Result<bool, String> {
        self.need(1, "boolean")?;
        Ok(self.buf.get_u8() != 0)
    }

    pub fn i16(&mut self) -> Result<i16, String> {
        self.need(2, "int16")?;
        Ok(self.buf.get_i16())
    }

    pub fn i32(&mut self) -> Result<i32, String> {
        self.need(4, "int32")?;
        Ok(self.buf.get_i32())
    }

    pub fn i64(&mut self) -> Result<i64, String> {
        self.need(8, "int64")?;
        Ok(self.buf.get_i64())
    }

    /// A `string` (int16 length, UTF-8); a null one is an error.
    pub fn string(&mut self) -> Result<StrBytes, String> {
        self.nullable_string()?
            .ok_or_else(|| String::from("null string where one is required"))
    }

    /// A `nullable_string`: length -1 is null.
    pub fn nullable_string(&mut self) -> Result<Option<StrBytes>, String> {
        let length = self.i16()?;
        if length < 0 {
            return if length == -1 {
                Ok(None)
            } else {
                Err(format!("string length {length}"))
            };
        }
        let length = length as usize;
        self.need(length, "string")?;
        let raw = self.buf.split_to(length);
        StrBytes::from_utf8(raw)
            .map(Some)
            .map_err(|e| format!("string: {e}"))
    }

    /// `nullable_bytes` / `records` (int32 length, -1 null).
    pub fn nullable_bytes(&mut self) -> Result<Option<Bytes>, String> {
        let length = self.i32()?;
        if length < 0 {
            return if length == -1 {
                Ok(None)
            } else {
                Err(format!("bytes length {length}"))
            };
        }
        let length = length as usize;
        self.need(length, "bytes")?;
        Ok(Some(self.buf.split_to(length)))
    }

    /// An array's element count (int32); null is an error.
    pub fn array_len(&mut self) -> Result<usize, String> {
        self.nullable_array_len()?
            .ok_or_else(|| String::from("null array where one is required"))
    }

    /// A nullable array's element count: -1 is null. A count larger than the bytes left cannot
    /// be honest (every element is at least one byte) and is refused before anything is read.
    pub fn nullable_array_len(&mut self) -> Result<Option<usize>, String> {
        let count = self.i32()?;
        if count < 0 {
            return if count == -1 {
                Ok(None)
            } else {
                Err(format!("array count {count}"))
            };
        }
        let count = count as usize;
        if count > self.buf.remaining() {
            return Err(format!(
                "array of {count} elements in {} bytes",
                self.buf.remaining()
            ));
        }
        Ok(Some(count))
    }

    /// `count` elements read one by one by `element` (never allocated from the count).
    pub fn elements<T>(
        &mut self,
        count: usize,
        mut element: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(element(self)?);
        }
        Ok(out)
    }

    /// An array read by `element`.
    pub fn array<T>(
        &mut self,
        element: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let count = self.array_len()?;
        self.elements(count, element)
    }
}

/// Writes a `string`.
pub fn put_string(out: &mut BytesMut, s: &str) {
    put_nullable_string(out, Some(s));
}

/// Writes a `nullable_string` (a string longer than int16 can say is cut at the limit: the
/// strings written here are names and config values the broker holds, far shorter).
pub fn put_nullable_string(out: &mut BytesMut, s: Option<&str>) {
    match s {
        None => out.put_i16(-1),
        Some(s) => {
            let mut end = s.len().min(i16::MAX as usize);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            out.put_i16(end as i16);
            out.put_slice(&s.as_bytes()[..end]);
        }
    }
}

/// Writes an array's count.
pub fn put_array_len(out: &mut BytesMut, count: usize) {
    out.put_i32(i32::try_from(count).unwrap_or(i32::MAX));
}

pub fn put_bool(out: &mut BytesMut, b: bool) {
    out.put_u8(u8::from(b));
}
