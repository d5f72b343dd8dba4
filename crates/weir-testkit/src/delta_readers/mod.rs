//! Real Delta Lake readers for the tests of the Delta sink: the tables Weir writes are read back
//! by the Python `deltalake` package (delta-rs, [`python`]) and by Apache Spark with Delta Lake
//! (delta-spark, [`spark`]), and both print the same JSON ([`DeltaRead`]) so that a test can
//! compare them with each other and with what it wrote.
//!
//! Each reader lives in its own Python virtual environment under [`cache_dir`](crate::cache_dir)
//! (`"delta-python"`, `"delta-spark"`), created and filled with pinned packages from PyPI on
//! first use; Spark's Delta jars (and, for S3, `hadoop-aws` with its AWS SDK) are fetched once
//! from Maven Central with `mvn` into the same cache and handed to Spark as `spark.jars` (no Ivy
//! resolution at test time). An install holds an exclusive lock on the cache and writes a marker
//! naming the pins only when it is complete, so a half install is redone and two test binaries
//! never install at once. A machine without `python3` (with `venv` and `pip`), or, for Spark,
//! without Java 17 or Maven, gets a [`TestkitError`] that says the test was NOT RUN and what to
//! install.
//!
//! Values print in a stable form whichever reader read them ([`DeltaRead::rows`]): `timestamp`
//! as UTC ISO-8601 with `Z`, `timestamp_ntz` without it, `date` as `YYYY-MM-DD`, decimals as
//! strings, binary as base64; rows are sorted by the JSON of every column in schema order.

pub mod python;
pub mod spark;

#[cfg(test)]
mod tests;

use crate::error::TestkitError;
use crate::s3::S3Server;
use serde_json::{Map, Value};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub use python::{
    DeltaCommit, DeltaHistory, DeltaWrite, PYTHON_PACKAGES, delta_python_history,
    delta_python_rows, delta_python_write,
};
pub use spark::{
    DELTA_SPARK_VERSION, HADOOP_AWS_VERSION, PYSPARK_PACKAGES, delta_spark_reads, delta_spark_rows,
};

type Result<T> = std::result::Result<T, TestkitError>;

/// The helpers both scripts share (the JSON shape and the normalisation of values).
const COMMON_PY: &str = include_str!("common.py");

/// Where a Delta table lives: a local directory (a path or `file://` URI) or an S3 bucket.
#[derive(Debug, Clone, Default)]
pub enum DeltaStorage {
    /// A local path; no options.
    #[default]
    Local,
    /// An S3-compatible store; the table URI is `s3://bucket/path` (Spark reads it as `s3a://`).
    S3(DeltaS3),
}

/// How to reach an S3-compatible store.
#[derive(Debug, Clone)]
pub struct DeltaS3 {
    /// `http://HOST:PORT`.
    pub endpoint: String,
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The region.
    pub region: String,
    /// Whether plain HTTP is allowed (the test servers speak HTTP).
    pub allow_http: bool,
    /// Path-style requests (`endpoint/bucket/key`) rather than virtual-hosted ones.
    pub path_style: bool,
}

impl DeltaS3 {
    /// The store of the kit's S3 test server ([`crate::s3::server`]) with the tests'
    /// credentials, over HTTP and path-style.
    pub fn for_server(server: &S3Server) -> DeltaS3 {
        DeltaS3 {
            endpoint: server.endpoint().to_owned(),
            access_key_id: crate::s3::ACCESS_KEY_ID.to_owned(),
            secret_access_key: crate::s3::SECRET_ACCESS_KEY.to_owned(),
            region: crate::s3::REGION.to_owned(),
            allow_http: true,
            path_style: true,
        }
    }
}

impl DeltaStorage {
    /// The `storage_options` of the `deltalake` package (delta-rs's object_store keys).
    pub fn python_options(&self) -> Map<String, Value> {
        let mut options = Map::new();
        if let DeltaStorage::S3(s3) = self {
            let mut set = |k: &str, v: &str| options.insert(k.to_owned(), Value::from(v));
            set("AWS_ENDPOINT_URL", &s3.endpoint);
            set("AWS_ACCESS_KEY_ID", &s3.access_key_id);
            set("AWS_SECRET_ACCESS_KEY", &s3.secret_access_key);
            set("AWS_REGION", &s3.region);
            set(
                "AWS_ALLOW_HTTP",
                if s3.allow_http { "true" } else { "false" },
            );
            let virtual_hosted = if s3.path_style { "false" } else { "true" };
            set("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", virtual_hosted);
        }
        options
    }
}

/// One column of a table's schema, as Delta's log (and Spark's JSON schema) names it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaField {
    /// The column name.
    pub name: String,
    /// The Delta type: a string for a primitive (`long`, `string`, `timestamp`,
    /// `decimal(10,2)`), an object for `struct`, `array` and `map`.
    pub data_type: Value,
    /// Whether the column may be null.
    pub nullable: bool,
}

/// What a reader saw in one version of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaRead {
    /// The version read.
    pub version: u64,
    /// The top-level columns, in order.
    pub schema: Vec<DeltaField>,
    /// The partition columns, in order.
    pub partition_columns: Vec<String>,
    /// The number of data files in the snapshot.
    pub num_files: u64,
    /// Every row as a JSON object, sorted (see the module's documentation).
    pub rows: Vec<Map<String, Value>>,
}

impl DeltaRead {
    /// The column names, in order.
    pub fn column_names(&self) -> Vec<&str> {
        self.schema.iter().map(|f| f.name.as_str()).collect()
    }

    /// The values of column `name`, one per row, in row order.
    pub fn column(&self, name: &str) -> Vec<Value> {
        self.rows
            .iter()
            .map(|r| r.get(name).cloned().unwrap_or(Value::Null))
            .collect()
    }

    /// Parses one read from the JSON the scripts print.
    fn from_json(value: &Value) -> std::result::Result<DeltaRead, String> {
        let field = |k: &str| value.get(k).ok_or_else(|| format!("no `{k}` in {value}"));
        let schema = field("schema")?
            .as_array()
            .ok_or("`schema` is not a list")?
            .iter()
            .map(|f| {
                Ok(DeltaField {
                    name: f["name"]
                        .as_str()
                        .ok_or("a field without a name")?
                        .to_owned(),
                    data_type: f["type"].clone(),
                    nullable: f["nullable"].as_bool().unwrap_or(true),
                })
            })
            .collect::<std::result::Result<_, String>>()?;
        let partition_columns = field("partition_columns")?
            .as_array()
            .ok_or("`partition_columns` is not a list")?
            .iter()
            .map(|c| {
                c.as_str()
                    .map(str::to_owned)
                    .ok_or("a partition column is not a string")
            })
            .collect::<std::result::Result<_, _>>()?;
        let rows = field("rows")?
            .as_array()
            .ok_or("`rows` is not a list")?
            .iter()
            .map(|r| r.as_object().cloned().ok_or("a row is not an object"))
            .collect::<std::result::Result<_, _>>()?;
        Ok(DeltaRead {
            version: field("version")?
                .as_u64()
                .ok_or("`version` is not a number")?,
            schema,
            partition_columns,
            num_files: field("num_files")?
                .as_u64()
                .ok_or("`num_files` is not a number")?,
            rows,
        })
    }
}

/// The error of a reader that cannot be had on this machine: the test was NOT RUN.
fn not_run(reader: &str, what: &str, detail: String, install: &str) -> TestkitError {
    TestkitError::Io {
        context: format!(
            "the Delta test was NOT RUN: the {reader} reader needs {what}, which is missing; \
             install it ({install}) and run the test again"
        ),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, detail),
    }
}

/// What installs Python with `venv` and `pip` on Debian or Ubuntu.
const PYTHON_INSTALL: &str = "Debian/Ubuntu: `apt-get install python3 python3-venv python3-pip`";

/// A failed install step (not a missing tool): the command and the end of its output.
fn install_failed(step: String, output: &std::process::Output) -> TestkitError {
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    TestkitError::Command {
        command: step,
        status: output.status.to_string(),
        output: tail(&text, 30),
    }
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Creates the virtual environment `cache/venv` and installs `packages` unless an earlier run
/// did: under an exclusive lock on `cache/install.lock`, and with a marker naming the pins
/// written only after a complete install (a different pin list, or a half install, starts
/// again from an empty environment). Returns the environment's directory.
fn install_venv(cache: &Path, packages: &[&str], reader: &str) -> Result<PathBuf> {
    let venv = cache.join("venv");
    let io = |what: &str, e: std::io::Error| TestkitError::Io {
        context: format!("{what} ({})", cache.display()),
        source: e,
    };
    fs::create_dir_all(cache).map_err(|e| io("creating the cache directory", e))?;
    let lock = File::create(cache.join("install.lock")).map_err(|e| io("creating the lock", e))?;
    lock.lock().map_err(|e| io("locking the cache", e))?;
    let marker = venv.join(".weir-installed");
    let wanted = packages.join(" ");
    if fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        return Ok(venv);
    }
    let started = Instant::now();
    if venv.exists() {
        fs::remove_dir_all(&venv).map_err(|e| io("removing an incomplete environment", e))?;
    }
    let created = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            not_run(
                reader,
                "`python3`",
                format!("running `python3 -m venv`: {e}"),
                PYTHON_INSTALL,
            )
        })?;
    if !created.status.success() {
        return Err(not_run(
            reader,
            "Python's venv module with ensurepip (python3-venv)",
            format!(
                "`python3 -m venv` failed: {}",
                String::from_utf8_lossy(&created.stderr).trim()
            ),
            PYTHON_INSTALL,
        ));
    }
    let pip = venv.join("bin").join("pip");
    let installed = Command::new(&pip)
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-cache-dir",
        ])
        .args(packages)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            not_run(
                reader,
                "pip in the virtual environment (python3-pip)",
                format!("running `{}`: {e}", pip.display()),
                PYTHON_INSTALL,
            )
        })?;
    if !installed.status.success() {
        return Err(install_failed(
            format!("{} install {wanted}", pip.display()),
            &installed,
        ));
    }
    fs::write(&marker, &wanted).map_err(|e| io("writing the install marker", e))?;
    eprintln!(
        "weir-testkit: installed {wanted} into {} in {:.1} s",
        venv.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(venv)
}

/// Runs `script` (with [`COMMON_PY`] before it) on the virtual environment's Python, with
/// `args` as its arguments and `env` set, and returns the JSON it printed on its
/// `WEIR-DELTA-JSON` line. A script that fails is a [`TestkitError::Command`] with the end of
/// its output.
fn run_script(
    venv: &Path,
    script: &str,
    args: &[&str],
    env: &[(&str, String)],
    name: &str,
) -> Result<Value> {
    use std::io::Write;
    let python = venv.join("bin").join("python");
    let dir = tempfile::Builder::new()
        .prefix("weir-delta-reader-")
        .tempdir()
        .map_err(crate::error::io_err("creating the reader's directory"))?;
    let path = dir.path().join("reader.py");
    let mut file = File::create(&path)
        .map_err(crate::error::io_err(format!("creating {}", path.display())))?;
    file.write_all(COMMON_PY.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.write_all(script.as_bytes()))
        .map_err(crate::error::io_err(format!("writing {}", path.display())))?;
    drop(file);
    let output = Command::new(&python)
        .arg(&path)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .map_err(crate::error::io_err(format!(
            "running {}",
            python.display()
        )))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("WEIR-DELTA-JSON "));
    match json {
        Some(json) if output.status.success() => {
            serde_json::from_str(json).map_err(|e| TestkitError::Command {
                command: name.to_owned(),
                status: output.status.to_string(),
                output: format!("its JSON does not parse ({e}): {json}"),
            })
        }
        _ => Err(install_failed(name.to_owned(), &output)),
    }
}

/// Parses a script's output that must be one read.
fn parse_read(value: &Value, name: &str) -> Result<DeltaRead> {
    DeltaRead::from_json(value).map_err(|detail| TestkitError::Command {
        command: name.to_owned(),
        status: "exit status: 0".into(),
        output: format!("unexpected output: {detail}"),
    })
}
