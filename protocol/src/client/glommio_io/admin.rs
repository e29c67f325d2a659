//! Async admin client on glommio: each call drives the [`AdminCore`] in the calling task.

use std::time::Duration;

use crate::client::admin::{
    AdminConfig, AdminCore, AdminOp, AdminOutcome, NewTopic, TopicDescription, TopicResult,
};
use crate::client::ClientError;

use super::net::{now_ms, AsyncNet};

pub struct Admin {
    core: AdminCore,
    net: AsyncNet,
}

impl Admin {
    /// Must be called inside a glommio executor.
    pub fn new(bootstrap: &[&str], config: AdminConfig) -> Result<Self, ClientError> {
        let net = AsyncNet::new(config.frame_limits, config.request_timeout_ms);
        let core = AdminCore::new(config, bootstrap.iter().map(|s| (*s).to_owned()).collect())?;
        Ok(Self { core, net })
    }

    pub async fn run(&mut self, op: AdminOp) -> Result<AdminOutcome, ClientError> {
        let id = self.core.submit(op, now_ms())?;
        loop {
            self.net
                .step(&mut self.core, Duration::from_millis(1000))
                .await;
            if let Some((_, result)) = self.core.take_results().into_iter().find(|(i, _)| *i == id)
            {
                return result;
            }
        }
    }

    pub async fn create_topics(
        &mut self,
        topics: Vec<NewTopic>,
    ) -> Result<Vec<TopicResult<()>>, ClientError> {
        match self
            .run(AdminOp::CreateTopics {
                topics,
                timeout_ms: 30_000,
                validate_only: false,
            })
            .await?
        {
            AdminOutcome::CreateTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    pub async fn delete_topics(
        &mut self,
        names: Vec<String>,
    ) -> Result<Vec<TopicResult<()>>, ClientError> {
        match self
            .run(AdminOp::DeleteTopics {
                names,
                timeout_ms: 30_000,
            })
            .await?
        {
            AdminOutcome::DeleteTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    pub async fn list_topics(&mut self) -> Result<Vec<String>, ClientError> {
        match self
            .run(AdminOp::ListTopics {
                include_internal: false,
            })
            .await?
        {
            AdminOutcome::ListTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    pub async fn describe_topics(
        &mut self,
        names: Vec<String>,
    ) -> Result<Vec<TopicResult<TopicDescription>>, ClientError> {
        match self.run(AdminOp::DescribeTopics { names }).await? {
            AdminOutcome::DescribeTopics(r) => Ok(r),
            other => Err(ClientError::Corrupt(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }
}
