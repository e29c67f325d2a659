//! README.md's API tables, rendered from the fronts' tables ([`crate::handlers::NATIVE_APIS`],
//! [`crate::kafka::KAFKA_APIS`], declared with [`crate::apis`]), and the test that README.md holds
//! exactly that text between its markers (`SPOOL_WRITE_README=1 cargo test -p spool-broker --lib
//! api_readme` rewrites it).

use kafka_protocol::messages::ApiKey as KafkaApiKey;
use spool_protocol::wire::ApiKey as NativeApiKey;

use crate::apis::ApiRange;

/// Marker lines around the native table in README.md.
pub const NATIVE_BEGIN: &str =
    "<!-- native-api-table: begin (generated from the broker's table: broker/src/apis.rs) -->";
pub const NATIVE_END: &str = "<!-- native-api-table: end -->";
/// Marker lines around the Kafka table in README.md.
pub const KAFKA_BEGIN: &str =
    "<!-- kafka-compatibility-table: begin (generated from the broker's table: broker/src/apis.rs) -->";
pub const KAFKA_END: &str = "<!-- kafka-compatibility-table: end -->";

/// `**lo–hi**` for an implemented API, `not implemented` otherwise.
fn cell<K: Copy + PartialEq>(table: &[ApiRange<K>], key: K) -> String {
    match spool_protocol::versions::range(table, key) {
        Some(r) => format!("**{}–{}**", r.min_version, r.max_version),
        None => String::from("not implemented"),
    }
}

/// The native table as README.md shows it: every API the schema defines, with the versions the
/// native port implements.
pub fn native_table() -> String {
    let table = crate::handlers::NATIVE_APIS;
    let mut out = String::from("| API | key | versions |\n|---|---|---|\n");
    for &key in NativeApiKey::ENUM_VALUES {
        let name = key.variant_name().unwrap_or("?");
        out.push_str(&format!("| {name} | {} | {} |\n", key.0, cell(table, key)));
    }
    out
}

/// The Kafka table as README.md shows it: every Kafka API key (every key the `kafka-protocol`
/// crate knows, from Kafka's own message definitions), with Kafka's versions and the versions the
/// Kafka port implements.
pub fn kafka_table() -> String {
    let table = crate::kafka::KAFKA_APIS;
    let mut out = String::from("| API | key | Kafka's versions | spool |\n|---|---|---|---|\n");
    for key in KafkaApiKey::iter() {
        let kafka = key.valid_versions();
        out.push_str(&format!(
            "| {key:?} | {} | {}–{} | {} |\n",
            key as i16,
            kafka.min,
            kafka.max,
            cell(table, key)
        ));
    }
    out
}

/// `readme` with the text between `begin` and `end` replaced by `table` (each marker on its own
/// line); `None` when a marker is missing.
pub fn splice(readme: &str, begin: &str, end: &str, table: &str) -> Option<String> {
    let (before, rest) = readme.split_once(begin)?;
    let (_, after) = rest.split_once(end)?;
    Some(format!("{before}{begin}\n{table}{end}{after}"))
}

/// `readme` with both tables regenerated; `None` when a marker is missing.
pub fn regenerate(readme: &str) -> Option<String> {
    let readme = splice(readme, NATIVE_BEGIN, NATIVE_END, &native_table())?;
    splice(&readme, KAFKA_BEGIN, KAFKA_END, &kafka_table())
}

#[cfg(test)]
mod tests {
    use super::*;

    const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");

    #[test]
    fn readme_tables_are_the_broker_tables() {
        let readme = std::fs::read_to_string(README).expect("reading README.md");
        let fresh = regenerate(&readme).unwrap_or_else(|| {
            panic!("README.md lacks a marker: {NATIVE_BEGIN} / {NATIVE_END} / {KAFKA_BEGIN} / {KAFKA_END}")
        });
        if std::env::var_os("SPOOL_WRITE_README").is_some() {
            if fresh != readme {
                std::fs::write(README, &fresh).expect("writing README.md");
            }
            return;
        }
        assert!(
            fresh == readme,
            "README.md's API tables are stale; regenerate them with\n    \
             SPOOL_WRITE_README=1 cargo test -p spool-broker --lib api_readme\n\
             Expected between the markers:\n{NATIVE_BEGIN}\n{}{NATIVE_END}\n\n{KAFKA_BEGIN}\n{}{KAFKA_END}",
            native_table(),
            kafka_table()
        );
    }

    #[test]
    fn splicing_replaces_only_the_text_between_the_markers() {
        let doc = "intro\nB\nold\nE\noutro\n";
        assert_eq!(
            splice(doc, "B", "E", "new\n").as_deref(),
            Some("intro\nB\nnew\nE\noutro\n")
        );
        assert_eq!(splice(doc, "X", "E", "new\n"), None);
    }

    #[test]
    fn the_rendered_tables_carry_every_listed_range() {
        let native = native_table();
        for a in crate::handlers::NATIVE_APIS {
            let row = format!(
                "| {} | {} | **{}–{}** |",
                a.api_key.variant_name().unwrap_or("?"),
                a.api_key.0,
                a.min_version,
                a.max_version
            );
            assert!(native.contains(&row), "{row} missing from\n{native}");
        }
        let kafka = kafka_table();
        for a in crate::kafka::KAFKA_APIS {
            let row = format!("| {:?} | {} |", a.api_key, a.api_key as i16);
            assert!(kafka.contains(&row), "{row} missing from\n{kafka}");
            let spool = format!("**{}–{}** |\n", a.min_version, a.max_version);
            let line = kafka.lines().find(|l| l.starts_with(&row)).unwrap_or("");
            assert!(format!("{line}\n").ends_with(&spool), "{line}");
        }
        assert!(kafka.contains("| Fetch | 1 | 4–18 | **4–11** |"));
        assert!(kafka.contains("| SaslHandshake | 17 | 0–1 | not implemented |"));
    }
}
