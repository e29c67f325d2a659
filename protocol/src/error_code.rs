//! [`ErrorCode`] (defined in the `spool-error-code` crate, re-exported here) and its conversions
//! to and from the flatbuffers `wire::ErrorCode` of `schemas/common.fbs`; a unit test checks the
//! two agree value by value.

use crate::wire;

pub use spool_error_code::ErrorCode;

impl From<ErrorCode> for wire::ErrorCode {
    fn from(code: ErrorCode) -> Self {
        wire::ErrorCode(code.code())
    }
}

impl From<wire::ErrorCode> for ErrorCode {
    fn from(code: wire::ErrorCode) -> Self {
        Self::from_wire(code.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_schema_value_by_value() {
        assert_eq!(ErrorCode::ALL.len(), wire::ErrorCode::ENUM_VALUES.len());
        for (ours, theirs) in ErrorCode::ALL
            .iter()
            .zip(wire::ErrorCode::ENUM_VALUES.iter())
        {
            assert_eq!(ours.code(), theirs.0);
            assert_eq!(Some(ours.name()), theirs.variant_name());
            assert_eq!(ErrorCode::from(*theirs), *ours);
        }
    }
}
