//! The credentials of a Hub the tests start as a process: an admin API token created with
//! `weir hub token create`, and the join token file its Agents register with.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The join token file's name, in the Hub's directory.
pub const JOIN_TOKEN_FILE: &str = "join.token";

/// Runs `weir hub token create --role <role>` on the store `hub.sqlite` in `dir` (created when
/// missing) and returns the token it prints.
pub fn create_token(weir: &Path, dir: &Path, role: &str) -> String {
    let out = Command::new(weir)
        .args([
            "hub",
            "token",
            "create",
            "--role",
            role,
            "--name",
            "tests",
            "--db",
            "hub.sqlite",
        ])
        .current_dir(dir)
        .output()
        .expect("weir hub token create runs");
    assert!(
        out.status.success(),
        "weir hub token create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned();
    assert!(token.starts_with("weir_"), "{token}");
    token
}

/// Writes the join token file into `dir` (owner-only) and returns its path.
pub fn write_join_token(dir: &Path) -> PathBuf {
    let path = dir.join(JOIN_TOKEN_FILE);
    std::fs::write(&path, "join-token-of-the-tests-0123456789\n").expect("join token file");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod the join token file");
    }
    path
}
