//! InitProducerId on the native front: what a producer gets is
//! [`super::txn::init_producer`]'s rule (shared with the Kafka front); an error leaves
//! the id and epoch at the schema's defaults.

use std::rc::Rc;

use spool_protocol::wire::{self, InitProducerIdRequestT, InitProducerIdResponseT};
use spool_protocol::ErrorCode;

use crate::front_rules::build;
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: InitProducerIdRequestT) -> InitProducerIdResponseT {
    let timeout_ms = req.transaction_timeout_ms;
    let current = (req.producer_id, req.producer_epoch);
    match super::txn::init_producer(shard, req.transactional_id.as_deref(), timeout_ms, current)
        .await
    {
        Ok(p) => build!(InitProducerIdResponseT {
            error_code: wire::ErrorCode::from(ErrorCode::None),
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
        }),
        Err(code) => build!(InitProducerIdResponseT {
            error_code: wire::ErrorCode::from(code)
        }),
    }
}
