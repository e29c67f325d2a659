//! How the pieces of a file range that are not in the page cache are sent ([`ColdRanges`]), and
//! the benchmark-only `SPOOL_FETCH_COLD` switch that picks it (read once per process).

use std::sync::OnceLock;

/// How pieces of a file range that are not in the page cache are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColdRanges {
    /// Read asynchronously (io_uring) through the page cache into memory and write from there.
    Read,
    /// Read asynchronously (io_uring) with O_DIRECT, bypassing the page cache, into memory and
    /// write from there, several pieces of a response at once (`direct_read.rs` says why). The
    /// default.
    Direct,
    /// Splice file → pipe on glommio's blocking thread, then pipe → socket on the reactor.
    BlockingSplice,
    /// No residency check: splice every piece on the reactor (a cache miss blocks the core).
    Splice,
}

impl ColdRanges {
    /// The environment variable that overrides the default.
    pub const ENV: &'static str = "SPOOL_FETCH_COLD";

    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(Self::Read),
            "direct" => Ok(Self::Direct),
            "blocking" => Ok(Self::BlockingSplice),
            "splice" => Ok(Self::Splice),
            other => Err(format!(
                "{}={other:?}: expected direct, read, blocking or splice",
                Self::ENV
            )),
        }
    }

    /// [`Self::ENV`] if set, else [`ColdRanges::Direct`].
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(Self::ENV) {
            Ok(v) => Self::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(Self::Direct),
            Err(e) => Err(format!("{}: {e}", Self::ENV)),
        }
    }

    /// The process's setting, read once; a bad value is reported and the default used.
    pub(super) fn current() -> Self {
        static CURRENT: OnceLock<ColdRanges> = OnceLock::new();
        *CURRENT.get_or_init(|| {
            let v = Self::from_env().unwrap_or_else(|e| {
                tracing::warn!("{e}; using direct");
                Self::Direct
            });
            tracing::info!(cold_ranges = ?v, "sending file ranges: cold pieces {v:?}");
            v
        })
    }
}
