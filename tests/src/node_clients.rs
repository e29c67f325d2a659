//! The Node.js Kafka clients the Kafka-port tests run: kafkajs, pinned by
//! `tests/kafkajs/package-lock.json` and installed into `tests/kafkajs/node_modules` by
//! `npm ci --prefix tests/kafkajs` (what `scripts/test.sh` does when it is missing).
//!
//! Promises: a missing `node`, or a kafkajs missing or at another version than the pinned one,
//! fails the test that needs it with a message saying how to get it, never a silent pass.

use std::path::{Path, PathBuf};

use crate::kafka_clients::on_path;

/// The kafkajs version `tests/kafkajs/package-lock.json` pins and the tests are written for.
pub const KAFKAJS_VERSION: &str = "2.2.4";

/// How to get what these tests need.
pub const NODE_INSTALL_HINT: &str = "run scripts/test.sh (the README's test command), which \
     installs kafkajs with `npm ci --prefix tests/kafkajs` when it is missing (node and npm \
     themselves must be installed: Debian's nodejs and npm)";

/// `tests/kafkajs`: the script, its package.json and lock file, and its node_modules.
pub fn kafkajs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kafkajs")
}

/// `node`, with kafkajs [`KAFKAJS_VERSION`] installed in `tests/kafkajs/node_modules`; panics
/// with [`NODE_INSTALL_HINT`] otherwise.
pub fn node_with_kafkajs() -> PathBuf {
    let node =
        on_path("node").unwrap_or_else(|| panic!("node is not on PATH: {NODE_INSTALL_HINT}"));
    let manifest = kafkajs_dir().join("node_modules/kafkajs/package.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!(
            "kafkajs is not installed ({}: {e}): {NODE_INSTALL_HINT}",
            manifest.display()
        )
    });
    let version = package_version(&text)
        .unwrap_or_else(|| panic!("{} has no version: {NODE_INSTALL_HINT}", manifest.display()));
    assert_eq!(
        version,
        KAFKAJS_VERSION,
        "kafkajs {version} is installed in {}; these tests are written for {KAFKAJS_VERSION}: \
         {NODE_INSTALL_HINT}",
        manifest.display()
    );
    node
}

/// The `version` of a package.json's text.
fn package_version(package_json: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(package_json).ok()?;
    value["version"].as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_a_package_version_and_nothing_from_other_text() {
        let v = super::package_version(r#"{"name": "kafkajs", "version": "2.2.4"}"#);
        assert_eq!(v.as_deref(), Some("2.2.4"));
        assert_eq!(super::package_version(r#"{"name": "kafkajs"}"#), None);
        assert_eq!(super::package_version("not json"), None);
    }

    #[test]
    fn the_lock_file_pins_the_version_the_probe_wants() {
        let lock = std::fs::read_to_string(super::kafkajs_dir().join("package-lock.json"))
            .expect("tests/kafkajs/package-lock.json is committed");
        let lock: serde_json::Value = serde_json::from_str(&lock).expect("the lock file is JSON");
        assert_eq!(
            lock["packages"]["node_modules/kafkajs"]["version"],
            super::KAFKAJS_VERSION
        );
    }
}
