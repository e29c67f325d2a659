//! InitProducerId on the native front: what a producer gets is
//! [`crate::front_rules::init_producer_id`]'s rule (shared with the Kafka front); an error leaves
//! the id and epoch at the schema's defaults.

use std::rc::Rc;

use spool_protocol::wire::{self, InitProducerIdRequestT, InitProducerIdResponseT};
use spool_protocol::ErrorCode;

use crate::front_rules::{self, build};
use crate::shard::Shard;

pub async fn handle(shard: &Rc<Shard>, req: InitProducerIdRequestT) -> InitProducerIdResponseT {
    match front_rules::init_producer_id(shard, req.transactional_id.as_deref()).await {
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
