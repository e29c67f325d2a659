//! The rules both request fronts (native: `crate::handlers`, Kafka: `crate::kafka`) share,
//! written once so the two ports cannot drift apart: what a front decides about a request before
//! and after the front-independent operations of `crate::ops`, and the helpers both use to
//! build answers. Each front keeps only its own wire shapes.
//!
//! Nothing here knows a wire format beyond the generated native object-API structs that
//! [`build!`] fills (the Kafka front fills them too, to call the group coordinator's contract).

/// Builds a generated (non-exhaustive) flatbuffers object-API struct from its default: the
/// generated structs are `#[non_exhaustive]`, so outside `spool-protocol` they can only be made
/// as `Default` plus field assignments.
macro_rules! build {
    ($t:ty { $($f:ident : $v:expr),* $(,)? }) => {{
        let mut value = <$t>::default();
        $(value.$f = $v;)*
        value
    }};
}
pub(crate) use build;
