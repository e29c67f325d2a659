//! The Rust that flatc 25.12.19 generated from `schemas/*.fbs` — committed, never edited by hand.
//!
//! Regenerate with `schemas/generate.sh`; `schemas/check-generated.sh` fails when these files are
//! stale. Lints are relaxed here only: the code is flatc's, not ours (its `unsafe` blocks are
//! flatc's table accessors, which are sound once a buffer has passed the verifier — and every
//! buffer this crate reads has).

/// `schemas/envelope.fbs` and everything it includes: the native wire protocol.
#[rustfmt::skip]
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn,
    unused_imports,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    mismatched_lifetime_syntaxes,
    unknown_lints
)]
#[path = "generated/wire/mod.rs"]
mod wire_tree;

/// `schemas/metadata.fbs`: the controller's metadata-log records.
#[rustfmt::skip]
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn,
    unused_imports,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    mismatched_lifetime_syntaxes,
    unknown_lints
)]
#[path = "generated/metadata/mod.rs"]
mod metadata_tree;

/// `schemas/internal.fbs`: the broker-to-broker protocol (port 9094).
#[rustfmt::skip]
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn,
    unused_imports,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    mismatched_lifetime_syntaxes,
    unknown_lints
)]
#[path = "generated/internal/mod.rs"]
mod internal_tree;

/// Every wire-protocol table, struct, enum and union (namespace `spool.protocol`), with the
/// object API (`FooT` owned types, `pack`/`unpack`).
pub mod wire {
    pub use super::wire_tree::spool::protocol::*;
}

/// The controller's metadata records (namespace `spool.metadata`).
pub mod metadata {
    pub use super::metadata_tree::spool::metadata::*;
}

/// The broker-to-broker protocol's frame header and messages (namespace `spool.internal`); the
/// plain Rust forms and the codec are in `crate::internal`.
pub mod internal_wire {
    pub use super::internal_tree::spool::internal::*;
}
