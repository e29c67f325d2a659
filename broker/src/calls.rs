//! The catalogue of calls one core makes of another (DESIGN §4): each request type with its reply
//! type and the service method that answers it, stated once in [`calls!`].
//!
//! From the one list the macro makes the mesh's [`Request`] and [`Reply`] enums, the [`Services`]
//! trait a core implements (one typed method per call), an impl of [`Call`] per request type, and
//! [`serve`], the receiving side's dispatch. A reply can only be made by the method that answers
//! its request, so a mismatched reply cannot be built: a caller of
//! `router.call(.., ProducePartition { .. })` gets a `ProduceResult`, never a run-time
//! REQUEST_TIMED_OUT for a reply of the wrong kind. Adding a call is one line here plus the
//! method's body in the service that answers it.
//!
//! Knows the request and reply data (`crate::requests`, `spool-core`'s group calls), never who
//! answers them.

use std::rc::Rc;

use spool_core::group::{GroupAnswer, GroupCall};

use spool_core::isr_change::AlterPartitionAnswer;
use spool_protocol::ErrorCode;

use crate::requests::{DeleteRecordsAnswer, DeleteRecordsPartition, WriteMarkerPartition};
use crate::txn::calls::{TxnAnswer, TxnCall};

use crate::requests::{
    AllocateProducerIds, AlterPartition, ApplyMetadata, ControllerOp, EpochEndAnswer,
    EpochEndQuery, FetchPartition, FetchResult, ListOffsetsPartition, ListOffsetsResult,
    MetricsText, ProducePartition, ProduceResult, ProducerIdRange, QuorumQuery, ReplicaFetchRead,
    ReplicaFetchShare, TopicOutcome, WatchPartitions,
};

/// A request one core can send another; [`Call::Reply`] is what comes back.
pub trait Call: Send + Sized + 'static {
    type Reply: Send + 'static;
    fn into_request(self) -> Request;
    /// The reply; `None` only if the catalogue itself were wrong (a reply of another call).
    fn from_reply(reply: Reply) -> Option<Self::Reply>;
    /// Answers the request on this core.
    fn serve<S: Services>(self, services: &Rc<S>)
        -> impl std::future::Future<Output = Self::Reply>;
}

macro_rules! calls {
    ($( $(#[$doc:meta])* $variant:ident($request:ty) -> $reply:ty => $method:ident; )*) => {
        /// A request crossing the mesh (one variant per call).
        pub enum Request { $( $(#[$doc])* $variant($request), )* }

        /// A reply crossing the mesh (one variant per call, the same names as [`Request`]).
        pub enum Reply { $( $variant($reply), )* }

        /// What a core answers: one method per call. The futures are not `Send` on purpose:
        /// each runs on the core that owns the data (thread-per-core).
        #[allow(async_fn_in_trait)]
        pub trait Services: 'static {
            $( $(#[$doc])* async fn $method(self: &Rc<Self>, request: $request) -> $reply; )*
        }

        $(
            impl Call for $request {
                type Reply = $reply;
                fn into_request(self) -> Request {
                    Request::$variant(self)
                }
                fn from_reply(reply: Reply) -> Option<$reply> {
                    match reply {
                        Reply::$variant(r) => Some(r),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
                async fn serve<S: Services>(self, services: &Rc<S>) -> $reply {
                    services.$method(self).await
                }
            }
        )*

        /// Answers a request that arrived from another core.
        pub async fn serve<S: Services>(services: &Rc<S>, request: Request) -> Reply {
            match request {
                $( Request::$variant(r) => Reply::$variant(services.$method(r).await), )*
            }
        }
    };
}

calls! {
    /// Appends one partition's batches on its owner.
    Produce(ProducePartition) -> ProduceResult => produce;
    /// Reads one partition below its high watermark.
    Fetch(FetchPartition) -> FetchResult => fetch;
    ListOffsets(ListOffsetsPartition) -> ListOffsetsResult => list_offsets;
    /// Where a leader epoch ends in the log of a partition this core owns.
    OffsetForLeaderEpoch(EpochEndQuery) -> EpochEndAnswer => offset_for_leader_epoch;
    /// Serves a follower's fetch for the partitions this core owns (a leader's half).
    ReplicaFetch(ReplicaFetchShare) -> Vec<ReplicaFetchRead> => replica_fetch;
    /// Waits for new data on some of the owner's partitions (a fetch's long poll).
    Watch(WatchPartitions) -> () => watch;
    /// A metadata change for the controller (core 0).
    Controller(ControllerOp) -> Vec<TopicOutcome> => controller;
    /// Committed metadata for this core's image; answered once applied.
    ApplyMetadata(ApplyMetadata) -> () => apply_metadata;
    /// A producer-id block from the controller (core 0).
    AllocateProducerIds(AllocateProducerIds) -> ProducerIdRange => allocate_producer_ids;
    /// A partition leader's ISR change for the active controller (core 0).
    AlterPartition(AlterPartition) -> AlterPartitionAnswer => alter_partition;
    Metrics(MetricsText) -> String => metrics;
    /// The controller's status (core 0), for Metadata's quorum section.
    Quorum(QuorumQuery) -> Option<spool_raft::ControllerStatus> => quorum;
    /// A consumer-group request for the coordinator on this core.
    Group(GroupCall) -> GroupAnswer => group;
    /// Deletes one partition's records below an offset on its owner (the leader).
    DeleteRecords(DeleteRecordsPartition) -> DeleteRecordsAnswer => delete_records;
    /// A transaction request for the coordinator on this core.
    Txn(TxnCall) -> TxnAnswer => txn;
    /// Writes a transaction marker to one partition this core owns (the leader).
    WriteMarker(WriteMarkerPartition) -> ErrorCode => write_marker;
}
