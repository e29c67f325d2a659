//! `spool txn list|describe`: transactional ids from the command line, on the client library's
//! ListTransactions and DescribeTransactions calls (`Admin::list_transactions`,
//! `Admin::describe_transaction`).
//!
//! `txn list` asks every live broker for the ids it coordinates: one line per id with its state,
//! producer id and epoch, and the coordinator's node id. `txn describe T` asks T's transaction
//! coordinator: state, producer id, epoch, timeout, the partitions of the open (or just
//! completed) transaction and when it started (`-` when none is open). An id no producer ever
//! used is an error that says so.

use bytes::Bytes;
use clap::Subcommand;
use spool_protocol::client::admin::TransactionDescription;
use spool_protocol::ErrorCode;

use super::{admin, explain, json_string, Brokers, Format};

#[derive(Debug, Subcommand)]
pub enum TxnCmd {
    /// List transactional ids with their state, producer id and epoch, and coordinator.
    List {
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// State, producer id and epoch, timeout, partitions and start time of a transactional id.
    Describe {
        transactional_id: String,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
}

pub fn txn(b: &Brokers, cmd: TxnCmd) -> Result<(), String> {
    match cmd {
        TxnCmd::List { format } => list(b, format),
        TxnCmd::Describe {
            transactional_id,
            format,
        } => describe(b, &transactional_id, format),
    }
}

fn js(s: &str) -> String {
    json_string(&Some(Bytes::from(s.to_owned())))
}

fn list(b: &Brokers, format: Format) -> Result<(), String> {
    let listed = admin(b)?
        .list_transactions()
        .map_err(|e| format!("list transactions: {}", explain(b, &e)))?;
    match format {
        Format::Json => {
            let items: Vec<String> = listed
                .iter()
                .map(|t| {
                    format!(
                        "{{\"transactional_id\":{},\"state\":{},\"producer_id\":{},\"producer_epoch\":{},\"coordinator\":{}}}",
                        js(&t.transactional_id),
                        js(&t.state),
                        t.producer_id,
                        t.producer_epoch,
                        t.coordinator
                    )
                })
                .collect();
            println!("[{}]", items.join(","));
        }
        Format::Text => {
            println!(
                "{:<32}  {:<18}  {:<12}  {:<6}  COORDINATOR",
                "TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH"
            );
            for t in listed {
                println!(
                    "{:<32}  {:<18}  {:<12}  {:<6}  {}",
                    t.transactional_id, t.state, t.producer_id, t.producer_epoch, t.coordinator
                );
            }
        }
    }
    Ok(())
}

fn describe(b: &Brokers, transactional_id: &str, format: Format) -> Result<(), String> {
    let d = admin(b)?
        .describe_transaction(transactional_id)
        .map_err(|e| match e.error_code() {
            Some(ErrorCode::TransactionalIdNotFound) => format!(
                "transactional id {transactional_id} does not exist (no producer has used it)"
            ),
            _ => format!(
                "describe transactional id {transactional_id}: {}",
                explain(b, &e)
            ),
        })?;
    match format {
        Format::Json => println!("{}", describe_json(&d)),
        Format::Text => print!("{}", describe_text(&d)),
    }
    Ok(())
}

fn partitions(d: &TransactionDescription) -> String {
    if d.partitions.is_empty() {
        return "-".into();
    }
    d.partitions
        .iter()
        .map(|tp| tp.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn describe_text(d: &TransactionDescription) -> String {
    let start = d
        .start_time_ms
        .map_or_else(|| "-".to_string(), |t| t.to_string());
    format!(
        "transactional-id {}\nstate            {}\nproducer-id      {}\nproducer-epoch   {}\ntimeout-ms       {}\nstart-time-ms    {}\npartitions       {}\n",
        d.transactional_id,
        d.state,
        d.producer_id,
        d.producer_epoch,
        d.timeout_ms,
        start,
        partitions(d)
    )
}

fn describe_json(d: &TransactionDescription) -> String {
    let parts: Vec<String> = d
        .partitions
        .iter()
        .map(|tp| {
            format!(
                "{{\"topic\":{},\"partition\":{}}}",
                js(&tp.topic),
                tp.partition
            )
        })
        .collect();
    format!(
        "{{\"transactional_id\":{},\"state\":{},\"producer_id\":{},\"producer_epoch\":{},\"timeout_ms\":{},\"start_time_ms\":{},\"partitions\":[{}]}}",
        js(&d.transactional_id),
        js(&d.state),
        d.producer_id,
        d.producer_epoch,
        d.timeout_ms,
        d.start_time_ms.map_or_else(|| "null".to_string(), |t| t.to_string()),
        parts.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool_protocol::client::TopicPartition;

    fn open() -> TransactionDescription {
        TransactionDescription {
            transactional_id: "tx".into(),
            state: "Ongoing".into(),
            producer_id: 4,
            producer_epoch: 1,
            timeout_ms: 60_000,
            start_time_ms: Some(1_700_000_000_000),
            partitions: vec![
                TopicPartition::new("orders", 0),
                TopicPartition::new("orders", 3),
            ],
        }
    }

    #[test]
    fn describe_prints_each_field_on_its_line() {
        let text = describe_text(&open());
        assert!(text.contains("state            Ongoing\n"), "{text}");
        assert!(
            text.contains("partitions       orders-0,orders-3\n"),
            "{text}"
        );
        assert!(text.contains("start-time-ms    1700000000000\n"), "{text}");
        let done = TransactionDescription {
            state: "CompleteAbort".into(),
            start_time_ms: None,
            partitions: vec![],
            ..open()
        };
        let text = describe_text(&done);
        assert!(text.contains("start-time-ms    -\n"), "{text}");
        assert!(text.contains("partitions       -\n"), "{text}");
    }

    #[test]
    fn describe_json_names_partitions_and_a_missing_start() {
        let json = describe_json(&TransactionDescription {
            start_time_ms: None,
            ..open()
        });
        assert!(json.contains("\"start_time_ms\":null"), "{json}");
        assert!(
            json.contains("{\"topic\":\"orders\",\"partition\":3}"),
            "{json}"
        );
    }
}
