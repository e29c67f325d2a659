//! What a group member prints, parsed: the records of `spool consume --group … --format json`
//! (stdout) and the CLI contract's stderr lines, exactly —
//! `revoked generation=<G> partitions=<t-p,…>`, `assigned generation=<G> partitions=<t-p,…>` and
//! `committed partitions=<t-p@offset,…>` — into an [`Output`] that answers what a member owns,
//! its generation and its last commit per partition.
//!
//! A line that starts with one of those words but does not parse is an error (the caller keeps it
//! as a contract break); any other stderr line is not an event. Parsing never panics.

use std::collections::{BTreeMap, BTreeSet};

use spool_protocol::client::TopicPartition;

/// One record a member printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Printed {
    pub tp: TopicPartition,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<String>,
    pub value: Option<String>,
    pub seq: u64,
}

/// One rebalance or commit line a member wrote on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Assigned {
        generation: i32,
        partitions: Vec<TopicPartition>,
        seq: u64,
    },
    Revoked {
        generation: i32,
        partitions: Vec<TopicPartition>,
        seq: u64,
    },
    Committed {
        offsets: Vec<(TopicPartition, i64)>,
        seq: u64,
    },
}

/// Everything a member printed so far.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub records: Vec<Printed>,
    pub events: Vec<Event>,
    /// Every stderr line, verbatim.
    pub stderr: Vec<String>,
    /// Lines that break the contract's formats (bad JSON, a bad `assigned …` line).
    pub malformed: Vec<String>,
    pub stdout_closed: bool,
    pub stderr_closed: bool,
}

impl Output {
    /// The partitions the member holds after every callback so far: `revoked` removes what it
    /// lists, `assigned` adds what it lists (right whether `assigned` names the whole assignment
    /// or only the added partitions).
    pub fn owned(&self) -> BTreeSet<TopicPartition> {
        let mut owned = BTreeSet::new();
        for e in &self.events {
            match e {
                Event::Assigned { partitions, .. } => owned.extend(partitions.iter().cloned()),
                Event::Revoked { partitions, .. } => {
                    for p in partitions {
                        owned.remove(p);
                    }
                }
                Event::Committed { .. } => {}
            }
        }
        owned
    }

    /// The generation of the last `assigned` line.
    pub fn generation(&self) -> Option<i32> {
        self.events.iter().rev().find_map(|e| match e {
            Event::Assigned { generation, .. } => Some(*generation),
            _ => None,
        })
    }

    /// Every `assigned` line: (generation, partitions, seq).
    pub fn assigned(&self) -> Vec<(i32, &[TopicPartition], u64)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Assigned {
                    generation,
                    partitions,
                    seq,
                } => Some((*generation, partitions.as_slice(), *seq)),
                _ => None,
            })
            .collect()
    }

    /// Every `revoked` line: (generation, partitions, seq).
    pub fn revoked(&self) -> Vec<(i32, &[TopicPartition], u64)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Revoked {
                    generation,
                    partitions,
                    seq,
                } => Some((*generation, partitions.as_slice(), *seq)),
                _ => None,
            })
            .collect()
    }

    /// Per partition, the offset of the last `committed` line that named it.
    pub fn last_committed(&self) -> BTreeMap<TopicPartition, i64> {
        let mut out = BTreeMap::new();
        for e in &self.events {
            if let Event::Committed { offsets, .. } = e {
                for (tp, o) in offsets {
                    out.insert(tp.clone(), *o);
                }
            }
        }
        out
    }

    /// Per partition, the offsets printed, in printing order.
    pub fn offsets_by_partition(&self) -> BTreeMap<TopicPartition, Vec<i64>> {
        let mut out: BTreeMap<TopicPartition, Vec<i64>> = BTreeMap::new();
        for r in &self.records {
            out.entry(r.tp.clone()).or_default().push(r.offset);
        }
        out
    }
}

/// One `--format json` record line.
pub fn parse_record(line: &str, seq: u64) -> Result<Printed, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let int = |name: &str| {
        v[name]
            .as_i64()
            .ok_or_else(|| format!("no integer {name:?}"))
    };
    let text = |name: &str| match &v[name] {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s.clone())),
        other => Err(format!("{name:?} is {other}, want a string or null")),
    };
    let topic = text("topic")?.ok_or("no topic")?;
    let partition = i32::try_from(int("partition")?).map_err(|e| e.to_string())?;
    Ok(Printed {
        tp: TopicPartition::new(topic, partition),
        offset: int("offset")?,
        timestamp_ms: int("timestamp")?,
        key: text("key")?,
        value: text("value")?,
        seq,
    })
}

/// One stderr line: `Ok(None)` for a line outside the contract's three kinds.
pub fn parse_event(line: &str, seq: u64) -> Result<Option<Event>, String> {
    let mut words = line.split(' ');
    let kind = words.next().unwrap_or_default();
    if !matches!(kind, "assigned" | "revoked" | "committed") {
        return Ok(None);
    }
    let rest: Vec<&str> = words.collect();
    let field = |i: usize, name: &str| -> Result<&str, String> {
        rest.get(i)
            .and_then(|w| w.strip_prefix(name))
            .and_then(|w| w.strip_prefix('='))
            .ok_or_else(|| format!("word {} is not {name}=…", i + 2))
    };
    let want_words = if kind == "committed" { 1 } else { 2 };
    if rest.len() != want_words {
        return Err(format!(
            "{} words after {kind}, want {want_words}",
            rest.len()
        ));
    }
    if kind == "committed" {
        let offsets = split_list(field(0, "partitions")?)
            .map(|item| {
                let (tp, offset) = item
                    .rsplit_once('@')
                    .ok_or_else(|| format!("{item:?} is not t-p@offset"))?;
                let offset = offset
                    .parse()
                    .map_err(|_| format!("bad offset in {item:?}"))?;
                Ok((parse_tp(tp)?, offset))
            })
            .collect::<Result<Vec<_>, String>>()?;
        return Ok(Some(Event::Committed { offsets, seq }));
    }
    let generation = field(0, "generation")?
        .parse()
        .map_err(|_| "generation is not a number".to_owned())?;
    let partitions = split_list(field(1, "partitions")?)
        .map(parse_tp)
        .collect::<Result<Vec<_>, String>>()?;
    let mut sorted = partitions.clone();
    sorted.sort();
    if sorted != partitions {
        return Err("partitions are not sorted".into());
    }
    Ok(Some(if kind == "assigned" {
        Event::Assigned {
            generation,
            partitions,
            seq,
        }
    } else {
        Event::Revoked {
            generation,
            partitions,
            seq,
        }
    }))
}

fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').filter(|s| !s.is_empty())
}

/// `t-p` (the topic may itself contain dashes: the partition follows the last one).
pub fn parse_tp(s: &str) -> Result<TopicPartition, String> {
    let (topic, partition) = s
        .rsplit_once('-')
        .ok_or_else(|| format!("{s:?} is not t-p"))?;
    let partition = partition
        .parse()
        .map_err(|_| format!("{s:?}: bad partition"))?;
    if topic.is_empty() {
        return Err(format!("{s:?}: empty topic"));
    }
    Ok(TopicPartition::new(topic, partition))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    #[test]
    fn parses_the_contract_lines() {
        assert_eq!(
            parse_event("assigned generation=3 partitions=a-b-0,a-b-11", 7),
            Ok(Some(Event::Assigned {
                generation: 3,
                partitions: vec![tp("a-b", 0), tp("a-b", 11)],
                seq: 7
            }))
        );
        assert_eq!(
            parse_event("revoked generation=4 partitions=", 1),
            Ok(Some(Event::Revoked {
                generation: 4,
                partitions: vec![],
                seq: 1
            }))
        );
        assert_eq!(
            parse_event("committed partitions=t-1@17,t-2@0", 2),
            Ok(Some(Event::Committed {
                offsets: vec![(tp("t", 1), 17), (tp("t", 2), 0)],
                seq: 2
            }))
        );
        assert_eq!(parse_event("joining group g", 1), Ok(None));
    }

    #[test]
    fn rejects_lines_that_break_the_contract() {
        for bad in [
            "assigned generation=x partitions=t-0",
            "assigned partitions=t-0",
            "assigned generation=1 partitions=t-1,t-0",
            "revoked generation=1 partitions=t",
            "committed partitions=t-0",
            "committed partitions=t-0@x",
            "committed",
        ] {
            assert!(parse_event(bad, 1).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn parses_a_json_record() {
        let r = parse_record(
            r#"{"topic":"t","partition":2,"offset":5,"timestamp":9,"key":null,"value":"v"}"#,
            3,
        )
        .expect("a record");
        assert_eq!(
            (r.tp, r.offset, r.key, r.value),
            (tp("t", 2), 5, None, Some("v".into()))
        );
        assert!(parse_record(r#"{"topic":"t"}"#, 1).is_err());
    }

    #[test]
    fn owned_follows_revocations_and_assignments() {
        let mut o = Output::default();
        for (i, line) in [
            "assigned generation=1 partitions=t-0,t-1,t-2",
            "revoked generation=1 partitions=t-2",
            "assigned generation=2 partitions=t-0,t-1",
            "committed partitions=t-0@4",
            "committed partitions=t-0@6,t-1@2",
        ]
        .iter()
        .enumerate()
        {
            o.events.push(
                parse_event(line, i as u64)
                    .expect("valid")
                    .expect("an event"),
            );
        }
        assert_eq!(o.owned(), [tp("t", 0), tp("t", 1)].into_iter().collect());
        assert_eq!(o.generation(), Some(2));
        assert_eq!(
            o.last_committed(),
            [(tp("t", 0), 6), (tp("t", 1), 2)].into_iter().collect()
        );
    }
}
