//! The Apache Spark reader with Delta Lake: pyspark ([`PYSPARK_PACKAGES`]) in a virtual
//! environment under [`cache_dir`]`("delta-spark")`, the `delta-spark` and `delta-storage` jars
//! ([`DELTA_SPARK_VERSION`]) fetched with Maven into the same cache, and for S3 `hadoop-aws`
//! ([`HADOOP_AWS_VERSION`], Spark's Hadoop) with the AWS SDK bundle it was built with. Spark
//! runs `local[1]` with a 512 MiB driver and no UI, in one JVM per call, so a test reads several
//! versions with one [`delta_spark_reads`].

use super::{DeltaRead, DeltaStorage, Result, install_venv, not_run, parse_read, run_script};
use crate::error::{TestkitError, io_err};
use crate::{cache_dir, fetch_once};
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// pyspark, pinned: Spark 3.5 (Scala 2.12, Hadoop 3.3.4), which Delta 3.3 is built for.
pub const PYSPARK_PACKAGES: [&str; 1] = ["pyspark==3.5.8"];
/// The Delta Lake release for Spark 3.5 (`io.delta:delta-spark_2.12`, `io.delta:delta-storage`).
pub const DELTA_SPARK_VERSION: &str = "3.3.2";
/// The `org.apache.hadoop:hadoop-aws` of Spark's Hadoop (s3a), fetched only for S3 tables.
pub const HADOOP_AWS_VERSION: &str = "3.3.4";
/// The `com.amazonaws:aws-java-sdk-bundle` that hadoop-aws [`HADOOP_AWS_VERSION`] was built with.
const AWS_SDK_BUNDLE_VERSION: &str = "1.12.262";

/// The reader's script (with `common.py` before it).
const SCRIPT: &str = include_str!("spark_read.py");

/// What installs Java and Maven on Debian or Ubuntu.
const JAVA_INSTALL: &str = "Debian/Ubuntu: `apt-get install openjdk-17-jre-headless maven`";

/// Reads version `version` (the latest when `None`) of the table at `table_uri` with Spark:
/// `spark.read.format("delta").option("versionAsOf", v).load(uri)`. A local path or `file://`
/// URI, or `s3://bucket/path` (read as `s3a://`).
///
/// # Errors
/// A NOT RUN error when Python, Java 17 or Maven cannot be had; [`TestkitError::Command`] when
/// an install or the read fails, with the end of the output.
pub fn delta_spark_rows(
    table_uri: &str,
    version: Option<u64>,
    storage: &DeltaStorage,
) -> Result<DeltaRead> {
    let versions: Vec<u64> = version.into_iter().collect();
    let mut reads = delta_spark_reads(table_uri, &versions, storage)?;
    reads.pop().ok_or_else(|| TestkitError::Command {
        command: format!("the Spark Delta reader ({table_uri})"),
        status: "exit status: 0".into(),
        output: "it returned no read".into(),
    })
}

/// Reads each of `versions` (the latest only when empty) of the table at `table_uri` in one
/// Spark session, in the order given: Spark starts once (about 10 s) for all of them.
///
/// # Errors
/// As [`delta_spark_rows`].
pub fn delta_spark_reads(
    table_uri: &str,
    versions: &[u64],
    storage: &DeltaStorage,
) -> Result<Vec<DeltaRead>> {
    let java_home = find_java()?;
    let cache = cache_dir("delta-spark");
    let mut jars = jar_files(&fetch_jars(&cache, "delta", &delta_jars())?)?;
    let mut conf = serde_json::Map::new();
    let mut uri = table_uri.to_owned();
    if let DeltaStorage::S3(s3) = storage {
        jars.extend(jar_files(&fetch_jars(&cache, "s3", &s3_jars())?)?);
        if let Some(rest) = uri.strip_prefix("s3://") {
            uri = format!("s3a://{rest}");
        }
        let mut set = |k: &str, v: &str| conf.insert(format!("spark.hadoop.fs.s3a.{k}"), v.into());
        set("endpoint", &s3.endpoint);
        set("endpoint.region", &s3.region);
        set("access.key", &s3.access_key_id);
        set("secret.key", &s3.secret_access_key);
        set(
            "path.style.access",
            if s3.path_style { "true" } else { "false" },
        );
        let ssl = !s3.endpoint.starts_with("http://");
        set("connection.ssl.enabled", if ssl { "true" } else { "false" });
        set(
            "aws.credentials.provider",
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        );
    }
    let venv = install_venv(&cache, &PYSPARK_PACKAGES, "Apache Spark (delta-spark)")?;
    let jars: Vec<String> = jars.iter().map(|p| p.display().to_string()).collect();
    let args = json!({ "versions": versions, "jars": jars, "conf": conf });
    let name = format!("the Spark Delta reader ({uri})");
    let value = run_script(
        &venv,
        SCRIPT,
        &[&uri, &args.to_string()],
        &[
            ("JAVA_HOME", java_home.display().to_string()),
            ("TZ", "UTC".into()),
            (
                "PYSPARK_PYTHON",
                venv.join("bin/python").display().to_string(),
            ),
            ("SPARK_LOCAL_IP", "127.0.0.1".into()),
        ],
        &name,
    )?;
    value
        .as_array()
        .ok_or_else(|| TestkitError::Command {
            command: name.clone(),
            status: "exit status: 0".into(),
            output: format!("unexpected output: {value}"),
        })?
        .iter()
        .map(|read| parse_read(read, &name))
        .collect()
}

/// The Maven coordinates of the Delta jars (each without its dependencies: Spark brings them).
fn delta_jars() -> Vec<String> {
    vec![
        format!("io.delta:delta-spark_2.12:{DELTA_SPARK_VERSION}"),
        format!("io.delta:delta-storage:{DELTA_SPARK_VERSION}"),
    ]
}

/// The Maven coordinates of the s3a file system.
fn s3_jars() -> Vec<String> {
    vec![
        format!("org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}"),
        format!("com.amazonaws:aws-java-sdk-bundle:{AWS_SDK_BUNDLE_VERSION}"),
    ]
}

/// The `.jar` files in `dir`, sorted.
fn jar_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut jars: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_err(format!("listing {}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jar"))
        .collect();
    jars.sort();
    Ok(jars)
}

/// The directory of the jars `artifacts` (`group:artifact:version`), fetched once with
/// `mvn dependency:copy` into `cache/jars-{name}-{versions}` (through [`fetch_once`]: locked,
/// staged in a temporary directory and renamed whole).
fn fetch_jars(cache: &Path, name: &str, artifacts: &[String]) -> Result<PathBuf> {
    let versions: Vec<&str> = artifacts
        .iter()
        .filter_map(|a| a.rsplit(':').next())
        .collect();
    let target = cache.join(format!("jars-{name}-{}", versions.join("-")));
    fetch_once(cache, &target, |work| {
        let out = work.join("jars");
        let started = Instant::now();
        for artifact in artifacts {
            let output = Command::new("mvn")
                .args([
                    "-q",
                    "-B",
                    "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy",
                ])
                .arg(format!("-Dartifact={artifact}"))
                .arg(format!("-DoutputDirectory={}", out.display()))
                .current_dir(work)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| {
                    not_run(
                        "Apache Spark (delta-spark)",
                        "Maven (`mvn`, to fetch the Delta jars once)",
                        format!("running `mvn`: {e}"),
                        JAVA_INSTALL,
                    )
                })?;
            if !output.status.success() {
                return Err(super::install_failed(
                    format!("mvn dependency:copy -Dartifact={artifact}"),
                    &output,
                ));
            }
        }
        eprintln!(
            "weir-testkit: fetched {} in {:.1} s",
            artifacts.join(", "),
            started.elapsed().as_secs_f64()
        );
        Ok(out)
    })
}

/// The home of a Java that Spark 3.5 runs on (17 to 21): `JAVA_HOME`, the `java` on `PATH`, or
/// one under `/usr/lib/jvm`.
fn find_java() -> Result<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        candidates.push(PathBuf::from(home).join("bin/java"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("java")));
    }
    if let Ok(dirs) = fs::read_dir("/usr/lib/jvm") {
        let mut dirs: Vec<PathBuf> = dirs.filter_map(|e| e.ok().map(|e| e.path())).collect();
        dirs.sort();
        candidates.extend(dirs.into_iter().map(|d| d.join("bin/java")));
    }
    let mut seen = Vec::new();
    for candidate in candidates {
        let Ok(real) = fs::canonicalize(&candidate) else {
            continue;
        };
        let Some(home) = real.parent().and_then(Path::parent).map(Path::to_path_buf) else {
            continue;
        };
        let major = Command::new(&real)
            .arg("-version")
            .stdin(Stdio::null())
            .output()
            .ok()
            .and_then(|o| java_major(&String::from_utf8_lossy(&o.stderr)));
        match major {
            Some(17..=21) => return Ok(home),
            Some(major) => seen.push(format!("{} is Java {major}", real.display())),
            None => {}
        }
    }
    Err(not_run(
        "Apache Spark (delta-spark)",
        "Java 17 to 21 (Spark 3.5 runs on no newer Java)",
        if seen.is_empty() {
            "no `java` on PATH, in JAVA_HOME or under /usr/lib/jvm".into()
        } else {
            seen.join("; ")
        },
        JAVA_INSTALL,
    ))
}

/// The major version in `java -version` output (`openjdk version "17.0.15" ...`; Java 8 and
/// older print `"1.8.0_..."`).
fn java_major(version_output: &str) -> Option<u32> {
    let quoted = version_output.split('"').nth(1)?;
    let mut parts = quoted.split(['.', '_', '-', '+']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        parts.next()?.parse().ok()
    } else {
        Some(first)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn java_versions_are_read_and_a_java_is_found_or_named() {
        assert_eq!(
            java_major("openjdk version \"17.0.15\" 2025-04-15"),
            Some(17)
        );
        assert_eq!(java_major("java version \"1.8.0_392\""), Some(8));
        assert_eq!(java_major("openjdk version \"25-ea\""), Some(25));
        match find_java() {
            Ok(home) => assert!(home.join("bin/java").exists(), "{}", home.display()),
            Err(e) => assert!(e.to_string().contains("NOT RUN"), "{e}"),
        }
    }

    #[test]
    fn jar_caches_are_named_by_their_versions() {
        assert!(
            delta_jars()
                .iter()
                .all(|a| a.ends_with(DELTA_SPARK_VERSION))
        );
        assert!(s3_jars()[0].contains("hadoop-aws"));
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("b.jar"), "").unwrap();
        fs::write(dir.path().join("a.jar"), "").unwrap();
        fs::write(dir.path().join("a.pom"), "").unwrap();
        let jars = jar_files(dir.path()).unwrap();
        assert_eq!(jars.len(), 2);
        assert!(jars[0].ends_with("a.jar"));
    }
}
