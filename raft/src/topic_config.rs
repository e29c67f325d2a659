//! Per-topic configs: which Kafka names spool accepts and what values are legal. The table lives
//! in `spool-core` (`spool_core::topic_config`), beside the typed config the image builds from
//! the same values, so the check and the parse cannot disagree; the controller's validation
//! (`crate::validate`) calls it before anything enters the raft log.

pub use spool_core::topic_config::{check_topic_config, known_topic_config_keys};
