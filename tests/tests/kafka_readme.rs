//! The README's Kafka compatibility table stays true: one row per Kafka API key (every key the
//! `kafka-protocol` crate knows, from Kafka's own message definitions), with Kafka's versions and
//! the versions spool's Kafka port implements — taken from `spool_broker::kafka::KAFKA_APIS`, the
//! same table the ApiVersions response is built from — or "not implemented".
//!
//! On a mismatch the test prints the whole expected table, ready to paste into README.md.

use kafka_protocol::messages::ApiKey;
use spool_broker::kafka::KAFKA_APIS;
use spool_protocol::kafka::versions;

/// Where the table starts and ends in README.md.
const BEGIN: &str =
    "<!-- kafka-compatibility-table: begin (tests/tests/kafka_readme.rs checks it) -->";
const END: &str = "<!-- kafka-compatibility-table: end -->";

/// The table as it must appear between the markers.
fn expected_table() -> String {
    let mut out = String::from("| API | key | Kafka's versions | spool |\n|---|---|---|---|\n");
    for key in ApiKey::iter() {
        let kafka = key.valid_versions();
        let spool = match versions::range(KAFKA_APIS, key) {
            Some(r) => format!("**{}–{}**", r.min_version, r.max_version),
            None => String::from("not implemented"),
        };
        out.push_str(&format!(
            "| {key:?} | {} | {}–{} | {spool} |\n",
            key as i16, kafka.min, kafka.max
        ));
    }
    out
}

#[test]
fn readme_lists_every_kafka_api_with_the_versions_spool_implements() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let readme = std::fs::read_to_string(path).expect("reading README.md");
    let expected = expected_table();
    let found = readme
        .split_once(BEGIN)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(table, _)| table.trim());
    assert_eq!(
        found,
        Some(expected.trim()),
        "README.md's Kafka compatibility table is missing or stale; between the markers it \
         should read:\n{BEGIN}\n{expected}{END}"
    );
}

#[test]
fn every_implemented_api_is_a_row_of_the_table() {
    let table = expected_table();
    for a in KAFKA_APIS {
        let (key, lo, hi) = (a.api_key, a.min_version, a.max_version);
        let row = format!("| {key:?} | {} |", key as i16);
        assert!(table.contains(&row), "{key:?} missing from\n{table}");
        assert!(
            table.contains(&format!("**{lo}–{hi}**")),
            "{key:?} {lo}–{hi}"
        );
    }
}
