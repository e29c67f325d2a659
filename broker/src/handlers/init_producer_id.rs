//! InitProducerId for idempotent producers: a producer id from this core's block (the controller
//! hands out blocks through raft, so ids are unique across restarts), epoch 0. Transactional ids
//! need the transaction coordinator, which is a later milestone: they get UNSUPPORTED_VERSION.

use std::rc::Rc;

use spool_protocol::wire::{self, InitProducerIdRequestT, InitProducerIdResponseT};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: InitProducerIdRequestT) -> InitProducerIdResponseT {
    if req
        .transactional_id
        .as_deref()
        .is_some_and(|t| !t.is_empty())
    {
        return build!(InitProducerIdResponseT {
            error_code: wire::ErrorCode::from(ErrorCode::UnsupportedVersion)
        });
    }
    match shard.next_producer_id().await {
        Ok(id) => build!(InitProducerIdResponseT {
            error_code: wire::ErrorCode::from(ErrorCode::None),
            producer_id: id,
            producer_epoch: 0,
        }),
        Err(code) => build!(InitProducerIdResponseT {
            error_code: wire::ErrorCode::from(code)
        }),
    }
}
