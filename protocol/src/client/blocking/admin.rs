//! Blocking admin client: each call drives the [`AdminCore`] on the caller's thread until its
//! operation finishes (bounded by `operation_timeout_ms`).

use std::time::Duration;

use crate::client::admin::{
    AdminConfig, AdminCore, AdminOp, AdminOutcome, ClusterDescription, CommitResults,
    GroupDescription, ListedGroup, ListedTransaction, NewTopic, TopicDescription, TopicResult,
    TransactionDescription,
};
use crate::client::{ClientError, TopicPartition};

use super::net::BlockingNet;

pub struct Admin {
    core: AdminCore,
    net: BlockingNet,
}

impl Admin {
    /// `bootstrap`: `host:port` of one or more brokers.
    pub fn new(bootstrap: &[&str], config: AdminConfig) -> Result<Self, ClientError> {
        let net = BlockingNet::new(config.frame_limits, config.request_timeout_ms);
        let core = AdminCore::new(config, bootstrap.iter().map(|s| (*s).to_owned()).collect())?;
        Ok(Self { core, net })
    }

    /// Runs one operation to completion.
    ///
    /// An operation that timed out without any broker answering, while connecting failed,
    /// fails with [`ClientError::Connection`] naming the address and the reason (refused,
    /// unresolvable, …) rather than with a bare timeout.
    pub fn run(&mut self, op: AdminOp) -> Result<AdminOutcome, ClientError> {
        let id = self.core.submit(op, super::now_ms())?;
        let responses_before = self.net.responses();
        loop {
            self.net.step(&mut self.core, Duration::from_millis(1000));
            if let Some((_, result)) = self.core.take_results().into_iter().find(|(i, _)| *i == id)
            {
                return result.map_err(|e| self.net.explain(e, responses_before));
            }
        }
    }

    pub fn create_topics(
        &mut self,
        topics: Vec<NewTopic>,
    ) -> Result<Vec<TopicResult<()>>, ClientError> {
        match self.run(AdminOp::CreateTopics {
            topics,
            timeout_ms: 30_000,
            validate_only: false,
        })? {
            AdminOutcome::CreateTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    pub fn delete_topics(
        &mut self,
        names: Vec<String>,
    ) -> Result<Vec<TopicResult<()>>, ClientError> {
        match self.run(AdminOp::DeleteTopics {
            names,
            timeout_ms: 30_000,
        })? {
            AdminOutcome::DeleteTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// The brokers and the controller, as the broker asked sees them.
    pub fn describe_cluster(&mut self) -> Result<ClusterDescription, ClientError> {
        match self.run(AdminOp::DescribeCluster)? {
            AdminOutcome::DescribeCluster(c) => Ok(c),
            other => Err(ClientError::Corrupt(format!(
                "unexpected answer to DescribeCluster: {other:?}"
            ))),
        }
    }

    pub fn list_topics(&mut self) -> Result<Vec<String>, ClientError> {
        match self.run(AdminOp::ListTopics {
            include_internal: false,
        })? {
            AdminOutcome::ListTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    pub fn describe_topics(
        &mut self,
        names: Vec<String>,
    ) -> Result<Vec<TopicResult<TopicDescription>>, ClientError> {
        match self.run(AdminOp::DescribeTopics { names })? {
            AdminOutcome::DescribeTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// Every consumer group the broker coordinates, sorted by id.
    pub fn list_groups(&mut self) -> Result<Vec<ListedGroup>, ClientError> {
        match self.run(AdminOp::ListGroups)? {
            AdminOutcome::ListGroups(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// A group's state, protocol and members (with their assignments).
    pub fn describe_group(&mut self, group_id: &str) -> Result<GroupDescription, ClientError> {
        match self.run(AdminOp::DescribeGroup {
            group_id: group_id.to_owned(),
        })? {
            AdminOutcome::DescribeGroup(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// A group's committed offsets (-1: none) for `partitions`, or all it committed (`None`).
    pub fn fetch_offsets(
        &mut self,
        group_id: &str,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<Vec<(TopicPartition, i64)>, ClientError> {
        match self.run(AdminOp::FetchOffsets {
            group_id: group_id.to_owned(),
            partitions,
        })? {
            AdminOutcome::FetchOffsets(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// Commits offsets for a group from outside any generation (refused while it has members).
    pub fn commit_offsets(
        &mut self,
        group_id: &str,
        offsets: Vec<(TopicPartition, i64)>,
    ) -> Result<CommitResults, ClientError> {
        match self.run(AdminOp::CommitOffsets {
            group_id: group_id.to_owned(),
            offsets,
        })? {
            AdminOutcome::CommitOffsets(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// Every transactional id the cluster's brokers coordinate, each tagged with the node id of
    /// its coordinator, sorted by id. Each live broker is asked for the ids it coordinates.
    pub fn list_transactions(&mut self) -> Result<Vec<ListedTransaction>, ClientError> {
        let cluster = self.describe_cluster()?;
        let mut all = Vec::new();
        for b in cluster.brokers.iter().filter(|b| !b.fenced) {
            let broker = Some(format!("{}:{}", b.host, b.port));
            match self.run(AdminOp::ListTransactions { broker })? {
                AdminOutcome::ListTransactions(listed) => {
                    all.extend(listed.into_iter().map(|mut t| {
                        t.coordinator = b.node_id;
                        t
                    }));
                }
                other => {
                    return Err(ClientError::Corrupt(format!(
                        "unexpected outcome {other:?}"
                    )))
                }
            }
        }
        all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(all)
    }

    /// One transactional id's state, producer id and epoch, timeout and partitions, from its
    /// transaction coordinator; an id no producer ever used fails with
    /// TRANSACTIONAL_ID_NOT_FOUND.
    pub fn describe_transaction(
        &mut self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, ClientError> {
        match self.run(AdminOp::DescribeTransaction {
            transactional_id: transactional_id.to_owned(),
        })? {
            AdminOutcome::DescribeTransaction(d) => Ok(d),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }
}
