//! Secrets the CLI reads or keeps: tokens from files or the environment, and files only their
//! owner may read.

use anyhow::{Context, Result, bail};
use std::path::Path;

/// A secret from `file` (its first line, trimmed), else from environment variable `env`, else
/// `None`. A file readable by others is used but warned about.
pub(crate) fn read_secret(file: Option<&Path>, env: &str) -> Result<Option<String>> {
    if let Some(path) = file {
        warn_if_shared(path);
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the secret file {}", path.display()))?;
        let secret = text.lines().next().unwrap_or("").trim().to_owned();
        if secret.is_empty() {
            bail!("the secret file {} is empty", path.display());
        }
        return Ok(Some(secret));
    }
    Ok(std::env::var(env)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty()))
}

/// Writes `text` to a new file at `path` that only its owner may read and write (0600), failing
/// when the file exists.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// The Agent's credential kept in `path`: read when the file exists, else made (64 random hex
/// digits) and written there 0600, so that the next start presents the same one.
pub(crate) fn agent_credential(path: &Path) -> Result<String> {
    if path.exists() {
        return read_secret(Some(path), "")?.context("the credential file is empty");
    }
    let credential = weir_hub::random_hex(32)?;
    write_private(path, &format!("{credential}\n"))?;
    eprintln!("weir agent: created the credential file {}", path.display());
    Ok(credential)
}

/// Warns when `path` may be read by users other than its owner.
fn warn_if_shared(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            eprintln!(
                "warning: {} holds a secret but other users may read it: chmod 600 it",
                path.display()
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// The PEM CA certificate in `path` and the path as text, for a client of a Hub served over
/// TLS with a self-signed or private-CA certificate.
pub(crate) fn ca_certificate(path: Option<&Path>) -> Result<Option<(Vec<u8>, String)>> {
    path.map(|p| {
        let pem = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        Ok((pem, p.display().to_string()))
    })
    .transpose()
}
