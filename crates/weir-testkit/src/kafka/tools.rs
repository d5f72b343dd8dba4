//! Finding Java and fetching the broker's jars with Maven.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{KAFKA_VERSION, LOG4J_VERSION, MIN_JAVA, Result};
use crate::error::TestkitError;
use crate::error::io_err;
use crate::{cache_dir, fetch_once};

/// Runs `cmd` to completion; a failure carries the end of its output.
pub(super) fn run_command(mut cmd: Command, name: &str) -> Result<()> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(io_err(format!("running {name}")))?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Err(TestkitError::Command {
        command: name.to_string(),
        status: output.status.to_string(),
        output: tail(&text),
    })
}

/// Checks that `java` runs and is Java 17 or newer; returns the program to run.
pub(super) fn check_java() -> Result<&'static str> {
    let output = Command::new("java")
        .arg("-version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestkitError::MissingTool {
            what: format!("`java` could not be run ({e})"),
        })?;
    let text = String::from_utf8_lossy(&output.stderr);
    match java_major(&text) {
        Some(major) if major >= MIN_JAVA => Ok("java"),
        Some(major) => Err(TestkitError::MissingTool {
            what: format!("`java` is Java {major}"),
        }),
        None => Err(TestkitError::MissingTool {
            what: format!("`java -version` printed no version: {}", text.trim()),
        }),
    }
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

/// The directory of the broker's jars, fetched with Maven on first use. A lock file keeps two
/// test binaries from fetching at once, and the jars are fetched into a temporary directory that
/// is renamed into place whole, so a half-finished fetch is never used.
pub(super) fn fetch_jars() -> Result<PathBuf> {
    let cache = cache_dir(&format!("kafka-{KAFKA_VERSION}"));
    let jars = cache.join("jars");
    fetch_once(&cache, &jars, |work| {
        let mvn = Command::new("mvn")
            .arg("-v")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestkitError::MissingTool {
                what: format!(
                    "the Kafka jars are not in {} yet and `mvn` could not be run ({e})",
                    cache.display()
                ),
            })?;
        if !mvn.status.success() {
            return Err(TestkitError::MissingTool {
                what: format!("`mvn -v` failed ({})", mvn.status),
            });
        }
        let pom_path = work.join("pom.xml");
        fs::write(&pom_path, pom()).map_err(io_err(format!("writing {}", pom_path.display())))?;
        let out = work.join("jars");
        let started = Instant::now();
        let mut cmd = Command::new("mvn");
        cmd.args(["-q", "-B", "-f"])
            .arg(&pom_path)
            .arg("dependency:copy-dependencies")
            .arg(format!("-DoutputDirectory={}", out.display()))
            .arg("-DincludeScope=runtime");
        run_command(
            cmd,
            &format!("mvn dependency:copy-dependencies (fetching Kafka {KAFKA_VERSION}'s jars)"),
        )?;
        let count = fs::read_dir(&out).map_or(0, Iterator::count);
        eprintln!(
            "weir-testkit: fetched {count} Kafka jars for {} in {:.1} s",
            cache.display(),
            started.elapsed().as_secs_f64()
        );
        Ok(out)
    })
}

/// The Maven project whose runtime dependencies are the broker's classpath.
fn pom() -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>weir.testkit</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"#
    )
}

/// The last 30 lines of `text`.
pub(super) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_versions_are_read_from_version_output() {
        let modern = "openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime Environment";
        assert_eq!(java_major(modern), Some(17));
        assert_eq!(java_major("java version \"1.8.0_392\""), Some(8));
        assert_eq!(java_major("openjdk version \"21\" 2023-09-19"), Some(21));
        assert_eq!(java_major("openjdk version \"25-ea\""), Some(25));
        assert_eq!(java_major("no version here"), None);
    }

    #[test]
    fn missing_tools_say_what_to_install() {
        let err = TestkitError::MissingTool {
            what: "`java` could not be run (No such file or directory)".into(),
        };
        let text = err.to_string();
        assert!(text.contains("Java 17"), "{text}");
        assert!(text.contains("Maven"), "{text}");
        assert!(text.contains("apt-get install"), "{text}");
    }
}
