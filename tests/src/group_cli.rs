//! `spool group describe G --format json` read into typed values, as the CLI contract shapes it:
//! `{"group","state","protocol","generation","members":[{"member_id","group_instance_id",
//! "client_id","host","assignment":["t-p",…]}],"offsets":[{"topic","partition","committed",
//! "high_watermark","lag_messages","lag_seconds"}]}`.
//!
//! A field missing or of the wrong type fails the test with the whole output: the shape is the
//! contract under test.

use std::collections::BTreeMap;

use serde_json::Value;
use spool_protocol::client::TopicPartition;

use crate::cli::spool_ok;
use crate::group_consumer::parse_tp;
use crate::Broker;

#[derive(Debug, Clone, PartialEq)]
pub struct GroupDescription {
    pub group: String,
    pub state: String,
    pub protocol: String,
    pub generation: i64,
    pub members: Vec<MemberDescription>,
    pub offsets: Vec<OffsetDescription>,
    /// The output as printed, for failure messages and the closing note.
    pub raw: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    pub assignment: Vec<TopicPartition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetDescription {
    pub tp: TopicPartition,
    pub committed: i64,
    pub high_watermark: i64,
    pub lag_messages: i64,
    pub lag_seconds: f64,
}

impl GroupDescription {
    /// Committed offset per partition.
    pub fn committed(&self) -> BTreeMap<TopicPartition, i64> {
        self.offsets
            .iter()
            .map(|o| (o.tp.clone(), o.committed))
            .collect()
    }
}

/// Runs `spool group describe <group> --format json` (which must succeed) and parses it.
pub fn describe(broker: &Broker, group: &str) -> GroupDescription {
    let out = spool_ok(
        broker,
        &["group", "describe", group, "--format", "json"],
        "",
    );
    parse_description(&out).unwrap_or_else(|e| panic!("group describe: {e}; printed:\n{out}"))
}

/// Parses the JSON the contract describes.
pub fn parse_description(out: &str) -> Result<GroupDescription, String> {
    let v: Value = serde_json::from_str(out.trim()).map_err(|e| format!("not JSON: {e}"))?;
    let members = array(&v, "members")?
        .iter()
        .map(|m| {
            Ok(MemberDescription {
                member_id: string(m, "member_id")?,
                group_instance_id: match &m["group_instance_id"] {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => return Err(format!("group_instance_id is {other}")),
                },
                client_id: string(m, "client_id")?,
                host: string(m, "host")?,
                assignment: array(m, "assignment")?
                    .iter()
                    .map(|a| a.as_str().ok_or("an assignment entry is not a string"))
                    .map(|a| parse_tp(a?))
                    .collect::<Result<_, _>>()?,
            })
        })
        .collect::<Result<_, String>>()?;
    let offsets = array(&v, "offsets")?
        .iter()
        .map(|o| {
            let partition = i32::try_from(int(o, "partition")?).map_err(|e| e.to_string())?;
            Ok(OffsetDescription {
                tp: TopicPartition::new(string(o, "topic")?, partition),
                committed: int(o, "committed")?,
                high_watermark: int(o, "high_watermark")?,
                lag_messages: int(o, "lag_messages")?,
                lag_seconds: o["lag_seconds"]
                    .as_f64()
                    .ok_or("no number \"lag_seconds\"")?,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(GroupDescription {
        group: string(&v, "group")?,
        state: string(&v, "state")?,
        protocol: string(&v, "protocol")?,
        generation: int(&v, "generation")?,
        members,
        offsets,
        raw: out.to_owned(),
    })
}

fn string(v: &Value, name: &str) -> Result<String, String> {
    v[name]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("no string {name:?} in {v}"))
}

fn int(v: &Value, name: &str) -> Result<i64, String> {
    v[name]
        .as_i64()
        .ok_or_else(|| format!("no integer {name:?} in {v}"))
}

fn array<'v>(v: &'v Value, name: &str) -> Result<&'v Vec<Value>, String> {
    v[name]
        .as_array()
        .ok_or_else(|| format!("no array {name:?} in {v}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_contract_shape() {
        let d = super::parse_description(
            r#"{"group":"g","state":"Stable","protocol":"range","generation":3,
            "members":[{"member_id":"m-1","group_instance_id":null,"client_id":"c","host":"/1",
            "assignment":["my-t-0","my-t-1"]}],
            "offsets":[{"topic":"my-t","partition":1,"committed":5,"high_watermark":9,
            "lag_messages":4,"lag_seconds":1.5}]}"#,
        )
        .expect("valid");
        assert_eq!(d.generation, 3);
        assert_eq!(d.members[0].assignment[1].to_string(), "my-t-1");
        assert_eq!(d.offsets[0].lag_messages, 4);
        assert!(super::parse_description(r#"{"group":"g"}"#).is_err());
    }
}
