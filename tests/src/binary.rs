//! Finding the `spool` binary the tests run, built once per test process.
//!
//! Cargo cannot (on stable) make one package depend on another package's *binary*, and
//! `env!("CARGO_BIN_EXE_spool")` exists only inside spool-broker itself. So the first test that
//! needs the binary runs `cargo build -p spool-broker --bin spool` into the very target
//! directory and profile this test executable was built in (found from its own path:
//! `<target>/<profile>/deps/<test>-<hash>`). On an up-to-date tree that is a no-op; on a clean
//! one it only links, because this crate depends on the spool-broker library and cargo has just
//! compiled it. So `cargo test -p spool-tests` always runs the broker of the sources it tests,
//! never a stale binary. Cargo releases its target-directory lock before it runs tests, so the
//! nested build does not wait on the outer one.
//!
//! `SPOOL_BIN=/path/to/spool` skips the build and runs that binary instead (a release build, an
//! installed one).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `spool` binary: `SPOOL_BIN`, or a fresh build in this test's target directory. Panics
/// with the build's output when it cannot be built: every process test needs it.
pub fn spool_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("SPOOL_BIN") {
        Some(p) => PathBuf::from(p),
        None => build(),
    })
}

/// `<target>/<profile>` of the running test executable.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    // <target>/<profile>/deps/<name>-<hash>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in <target>/<profile>/deps");
    dir.to_path_buf()
}

fn build() -> PathBuf {
    let profile_dir = profile_dir();
    let target_dir = profile_dir
        .parent()
        .expect("<profile> has a parent target directory");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("unexpected target layout: {}", profile_dir.display()),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace root");
    let out = Command::new(cargo)
        .current_dir(workspace)
        .args(["build", "--quiet", "-p", "spool-broker", "--bin", "spool"])
        .arg("--profile")
        .arg(profile)
        .arg("--target-dir")
        .arg(target_dir)
        .output()
        .expect("running cargo to build the spool binary");
    assert!(
        out.status.success(),
        "building the spool binary failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = profile_dir.join("spool");
    assert!(bin.is_file(), "cargo built no binary at {}", bin.display());
    bin
}
