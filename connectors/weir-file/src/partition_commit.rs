//! Partition commit (Flink's `sink.partition-commit.*`): when a partition directory of the
//! file sink is complete, a success file (`_SUCCESS`) is written into it.
//!
//! A writer tracks the partitions it wrote since their last commit. A partition is ready when
//! the trigger says so: `partition-time`, once the watermark reaches the time extracted from its
//! values plus the delay; `process-time`, once the delay has passed since the writer first
//! wrote to it (since its last commit). At end of input (the final watermark) every partition is
//! ready. In epoch mode, a pre-commit lists the partitions ready at that moment, after the
//! epoch's files, and `commit_epoch` writes their success files after publishing those files;
//! without checkpoints, `finish` commits every partition after publishing the last files.

use crate::location::{FileLocation, store_error};
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use weir_api::{DurationMs, Error, Result};

/// The default name of the success file.
pub const DEFAULT_SUCCESS_FILE: &str = "_SUCCESS";

/// What decides that a partition is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CommitTrigger {
    /// The writer's clock: the delay after the partition was first written (Flink's default).
    #[default]
    ProcessTime,
    /// Event time: the watermark passed the partition's time plus the delay.
    PartitionTime,
}

/// How a complete partition is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CommitPolicy {
    /// An empty success file in the partition's directory.
    SuccessFile,
}

/// The resolved partition-commit settings of a sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommitSettings {
    pub(crate) trigger: CommitTrigger,
    pub(crate) delay_ms: i64,
    pub(crate) success_file: String,
    /// `partition-time`: the pattern the partition's time is built from (`$dt $hour:00:00`).
    pub(crate) pattern: String,
    /// The partition columns, in order.
    pub(crate) columns: Vec<String>,
    /// Where the pattern option is, for errors.
    pub(crate) pattern_path: String,
}

impl CommitSettings {
    /// The settings of a sink partitioned by `columns`; `pattern` unset: the first column's
    /// value (as Flink does).
    ///
    /// # Errors
    /// [`Error::Config`] at the option's path for a success-file name that is not a plain file
    /// name, or a pattern naming no partition column or another column.
    pub(crate) fn new(
        trigger: CommitTrigger,
        delay: Option<DurationMs>,
        success_file: Option<&str>,
        pattern: Option<&str>,
        columns: &[String],
        options_path: &str,
    ) -> Result<Self> {
        let success_file = success_file.unwrap_or(DEFAULT_SUCCESS_FILE).to_owned();
        if success_file.is_empty()
            || success_file.contains('/')
            || success_file == "."
            || success_file == ".."
        {
            return Err(Error::config(
                format!("{options_path}.partition_success_file_name"),
                format!("`{success_file}` is not a file name"),
            ));
        }
        let pattern_path = format!("{options_path}.partition_time_pattern");
        let pattern = match pattern {
            Some(p) => p.to_owned(),
            None => format!("${}", columns.first().map_or("", String::as_str)),
        };
        let named = pattern_columns(&pattern);
        if let Some(bad) = named.iter().find(|n| !columns.contains(n)) {
            return Err(Error::config(
                pattern_path,
                format!(
                    "the pattern `{pattern}` names `${bad}`, which is not a partition column \
                     (partition columns: {})",
                    columns.join(", ")
                ),
            ));
        }
        if trigger == CommitTrigger::PartitionTime && named.is_empty() {
            return Err(Error::config(
                pattern_path,
                format!("the pattern `{pattern}` names no partition column (`$column`)"),
            ));
        }
        Ok(Self {
            trigger,
            delay_ms: delay.unwrap_or_default().as_i64(),
            success_file,
            pattern,
            columns: columns.to_vec(),
            pattern_path,
        })
    }

    /// The time (epoch milliseconds, UTC) of the partition with `values`: the pattern with each
    /// `$column` replaced by its value, read as `yyyy-MM-dd HH:mm:ss` or `yyyy-MM-dd`.
    ///
    /// # Errors
    /// [`Error::Config`] at the pattern's option when the text does not read as a time.
    pub(crate) fn partition_time(&self, values: &[Option<String>]) -> Result<i64> {
        let mut text = self.pattern.clone();
        // Longest names first, so `$hour` is not replaced as `$h` + `our`.
        let mut order: Vec<usize> = (0..self.columns.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.columns[i].len()));
        for i in order {
            let value = values.get(i).cloned().flatten().unwrap_or_default();
            text = text.replace(&format!("${}", self.columns[i]), &value);
        }
        parse_time(text.trim()).ok_or_else(|| {
            Error::config(
                self.pattern_path.clone(),
                format!(
                    "the partition time of the partition {values:?} is `{text}`, which is not a \
                     time `yyyy-[M]M-[d]d [H]H:[m]m:[s]s` or a date `yyyy-[M]M-[d]d`"
                ),
            )
        })
    }
}

/// Epoch milliseconds (UTC) of `yyyy-[M]M-[d]d[ [H]H[:[m]m[:[s]s]]]` (Flink's lenient partition
/// time format).
fn parse_time(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t.trim())),
        None => (text, None),
    };
    let number = |s: &str, max_len: usize| -> Option<i64> {
        (!s.is_empty() && s.len() <= max_len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut d = date.split('-');
    let (year, month, day) = (
        number(d.next()?, 4)?,
        number(d.next()?, 2)?,
        number(d.next()?, 2)?,
    );
    if d.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut seconds = 0;
    if let Some(time) = time.filter(|t| !t.is_empty()) {
        let mut parts = time.split(':');
        let h = number(parts.next()?, 2)?;
        let m = parts.next().map_or(Some(0), |m| number(m, 2))?;
        let s = parts.next().map_or(Some(0), |s| number(s, 2))?;
        if parts.next().is_some() || h > 23 || m > 59 || s > 59 {
            return None;
        }
        seconds = h * 3600 + m * 60 + s;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + seconds) * 1000)
}

/// The `$name`s a pattern refers to.
fn pattern_columns(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while let Some(at) = rest.find('$') {
        let name: String = rest[at + 1..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + 1 + name.len()..];
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// A partition waiting for its commit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    /// `partition-time`: its time; `process-time`: when it was first written (epoch ms).
    since_ms: i64,
}

/// One writer's partitions written since their last commit.
#[derive(Debug)]
pub(crate) struct PartitionTracker {
    settings: CommitSettings,
    pending: BTreeMap<String, Pending>,
    watermark: Option<i64>,
    /// The final watermark was seen: every partition is ready.
    ended: bool,
}

impl PartitionTracker {
    /// A tracker with no partition pending and no watermark yet.
    pub(crate) fn new(settings: CommitSettings) -> Self {
        Self {
            settings,
            pending: BTreeMap::new(),
            watermark: None,
            ended: false,
        }
    }

    /// The success file's name.
    pub(crate) fn success_file(&self) -> &str {
        &self.settings.success_file
    }

    /// Records that rows were written to partition `directory` with `values`.
    ///
    /// # Errors
    /// `partition-time`: the partition's time cannot be extracted.
    pub(crate) fn wrote(&mut self, directory: &str, values: &[Option<String>]) -> Result<()> {
        if self.pending.contains_key(directory) {
            return Ok(());
        }
        let since_ms = match self.settings.trigger {
            CommitTrigger::PartitionTime => self.settings.partition_time(values)?,
            CommitTrigger::ProcessTime => now_ms(),
        };
        self.pending
            .insert(directory.to_owned(), Pending { since_ms });
        Ok(())
    }

    /// The watermark advanced to `watermark` (`i64::MAX`: end of input).
    pub(crate) fn watermark(&mut self, watermark: i64) {
        self.watermark = Some(self.watermark.map_or(watermark, |w| w.max(watermark)));
        if watermark == i64::MAX {
            self.ended = true;
        }
    }

    /// Takes the partitions ready to commit now, sorted.
    pub(crate) fn take_ready(&mut self) -> Vec<String> {
        let now = now_ms();
        let delay = self.settings.delay_ms;
        let ended = self.ended;
        let trigger = self.settings.trigger;
        let watermark = self.watermark;
        let ready: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                ended
                    || match trigger {
                        CommitTrigger::PartitionTime => {
                            watermark.is_some_and(|w| w >= p.since_ms.saturating_add(delay))
                        }
                        CommitTrigger::ProcessTime => now >= p.since_ms.saturating_add(delay),
                    }
            })
            .map(|(d, _)| d.clone())
            .collect();
        for d in &ready {
            self.pending.remove(d);
        }
        ready
    }

    /// Takes every pending partition (end of input), sorted.
    pub(crate) fn take_all(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pending).into_keys().collect()
    }

    /// The pending partitions, sorted (for the pre-commit record, so that a restored run
    /// commits them).
    pub(crate) fn pending(&self) -> Vec<String> {
        self.pending.keys().cloned().collect()
    }

    /// Adopts partitions a previous run of the job had pending (restored from a checkpoint):
    /// their values are read back from the directory names.
    ///
    /// # Errors
    /// `partition-time`: the partition's time cannot be extracted.
    pub(crate) fn adopt(&mut self, directory: &str) -> Result<()> {
        let values = crate::partition::values_of(&format!("{directory}/x"), &self.settings.columns)
            .unwrap_or_default();
        self.wrote(directory, &values)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Writes the success file `name` into each partition directory of `partitions` (relative to
/// `location`); writing it again is harmless.
///
/// # Errors
/// External errors from the store, naming the file.
pub(crate) async fn write_success_files(
    location: &FileLocation,
    partitions: &[String],
    name: &str,
) -> Result<()> {
    for partition in partitions {
        let relative = format!("{partition}/{name}");
        let path = location.child(&relative)?;
        location
            .store()
            .put(&path, PutPayload::new())
            .await
            .map_err(|e| store_error(format!("writing `{}`", location.display(&relative)), e))?;
        tracing::debug!(partition = %partition, "committed partition");
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings(trigger: CommitTrigger, delay: &str, pattern: Option<&str>) -> CommitSettings {
        CommitSettings::new(
            trigger,
            Some(DurationMs::parse(delay).unwrap()),
            None,
            pattern,
            &["dt".to_owned(), "hour".to_owned()],
            "sinks[0].options",
        )
        .unwrap()
    }

    #[test]
    fn partition_time_comes_from_the_pattern() {
        let s = settings(CommitTrigger::PartitionTime, "1 h", Some("$dt $hour:00:00"));
        let t = s
            .partition_time(&[Some("2026-12-02".into()), Some("11".into())])
            .unwrap();
        assert_eq!(t, 1_796_209_200_000);
        let day = settings(CommitTrigger::PartitionTime, "0s", None);
        assert_eq!(
            day.partition_time(&[Some("1970-01-02".into()), None])
                .unwrap(),
            86_400_000
        );
        let err = s.partition_time(&[None, Some("1".into())]).unwrap_err();
        assert!(
            matches!(&err, Error::Config { path, .. } if path == "sinks[0].options.partition_time_pattern"),
            "{err}"
        );
        let err = CommitSettings::new(
            CommitTrigger::PartitionTime,
            None,
            None,
            Some("$day"),
            &["dt".to_owned()],
            "s",
        )
        .unwrap_err();
        assert!(err.to_string().contains("$day"), "{err}");
    }

    #[test]
    fn partitions_are_ready_when_the_watermark_passes_time_plus_delay() {
        let s = settings(CommitTrigger::PartitionTime, "1 h", Some("$dt $hour:00:00"));
        let mut t = PartitionTracker::new(s);
        let h = |hour: u32| vec![Some("1970-01-01".to_owned()), Some(hour.to_string())];
        t.wrote("dt=1970-01-01/hour=1", &h(1)).unwrap();
        t.wrote("dt=1970-01-01/hour=2", &h(2)).unwrap();
        assert!(t.take_ready().is_empty());
        t.watermark(2 * 3_600_000 - 1);
        assert!(t.take_ready().is_empty());
        t.watermark(2 * 3_600_000);
        assert_eq!(t.take_ready(), ["dt=1970-01-01/hour=1"]);
        // A late row re-opens a committed partition; it is committed again.
        t.wrote("dt=1970-01-01/hour=1", &h(1)).unwrap();
        assert_eq!(
            t.pending(),
            ["dt=1970-01-01/hour=1", "dt=1970-01-01/hour=2"]
        );
        assert_eq!(t.take_ready(), ["dt=1970-01-01/hour=1"]);
        t.watermark(i64::MAX);
        assert_eq!(t.take_ready(), ["dt=1970-01-01/hour=2"]);
    }

    #[test]
    fn process_time_waits_for_the_delay() {
        let mut t = PartitionTracker::new(settings(CommitTrigger::ProcessTime, "0s", None));
        t.wrote("dt=a", &[Some("a".into())]).unwrap();
        assert_eq!(t.take_ready(), ["dt=a"]);
        let mut t = PartitionTracker::new(settings(CommitTrigger::ProcessTime, "1 h", None));
        t.wrote("dt=a", &[Some("a".into())]).unwrap();
        assert!(t.take_ready().is_empty());
        assert_eq!(t.take_all(), ["dt=a"]);
    }
}
