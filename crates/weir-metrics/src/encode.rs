//! Reading jobs' counters at scrape time and encoding them as Prometheus metric families.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::Arc;
use weir_api::SemanticMode;
use weir_runtime::{
    CheckpointProbe, CheckpointSummary, EpochStats, JobMetrics, MetricsSnapshot, OperatorSnapshot,
    SubtaskSnapshot,
};

/// One job whose metrics an exporter shows: its id (the `job` label), its live counters and its
/// checkpoint counters.
#[derive(Debug, Clone)]
pub struct JobHandle {
    /// The job's id.
    pub job: String,
    /// Its live counters ([`weir_runtime::RunningJob::metrics`]).
    pub metrics: Arc<JobMetrics>,
    /// Its checkpoint counters ([`weir_runtime::RunningJob::checkpoint_probe`]).
    pub checkpoints: CheckpointProbe,
}

/// Where an exporter finds the jobs to show at each scrape.
pub trait JobSource: Send + Sync + 'static {
    /// The jobs now.
    fn jobs(&self) -> Vec<JobHandle>;
}

impl JobSource for JobHandle {
    fn jobs(&self) -> Vec<JobHandle> {
        vec![self.clone()]
    }
}

/// The metrics of every job of `source`, in the OpenMetrics text format.
pub fn encode(source: &dyn JobSource) -> String {
    let jobs = source
        .jobs()
        .into_iter()
        .map(|h| JobReading {
            snapshot: h.metrics.snapshot(),
            split_rows: h.metrics.split_rows(),
            subtasks: h.metrics.subtasks(),
            checkpoints: h.checkpoints.summary(),
            last_epoch: h.checkpoints.last_completed_epoch(),
            semantic_mode: h.metrics.semantic_mode(),
            job: h.job,
        })
        .collect();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Readings(jobs)));
    let mut text = String::new();
    // Writing to a String cannot fail; a collector error would be a bug in this module.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        tracing::warn!(error = %e, "encoding the metrics failed");
    }
    text
}

/// One job's counters, read once per scrape.
#[derive(Debug)]
struct JobReading {
    job: String,
    snapshot: MetricsSnapshot,
    subtasks: Vec<SubtaskSnapshot>,
    /// `(operator, split, rows read)`.
    split_rows: Vec<(String, String, u64)>,
    checkpoints: Option<CheckpointSummary>,
    /// The newest completed epoch, for the per-task checkpoint gauges.
    last_epoch: Option<EpochStats>,
    semantic_mode: Option<SemanticMode>,
}

/// A semantic mode as the job spec spells it.
fn mode_name(mode: SemanticMode) -> &'static str {
    match mode {
        SemanticMode::StrictExactlyOnce => "STRICT_EXACTLY_ONCE",
        SemanticMode::EffectivelyOnce => "EFFECTIVELY_ONCE",
        SemanticMode::AtLeastOnce => "AT_LEAST_ONCE",
        SemanticMode::BestEffort => "BEST_EFFORT",
    }
}

/// The readings of one scrape, encoded as one collector.
#[derive(Debug)]
struct Readings(Vec<JobReading>);

type Labels = Vec<(&'static str, String)>;

/// A counter's name without `_total` (the encoder appends it), its help, and per job its
/// labelled values.
struct Family<'a, V> {
    name: &'static str,
    help: &'static str,
    samples: Box<dyn Fn(&'a JobReading) -> Vec<(Labels, V)> + 'a>,
}

fn subtask_labels(job: &str, s: &SubtaskSnapshot) -> Labels {
    task_labels(job, &s.operator_id, s.subtask)
}

/// `job`, `operator`, `subtask`.
fn task_labels(job: &str, operator: &str, subtask: u32) -> Labels {
    vec![
        ("job", job.to_owned()),
        ("operator", operator.to_owned()),
        ("subtask", subtask.to_string()),
    ]
}

/// `job`, `operator`, `split`.
fn split_labels(job: &str, operator: &str, split: &str) -> Labels {
    vec![
        ("job", job.to_owned()),
        ("operator", operator.to_owned()),
        ("split", split.to_owned()),
    ]
}

fn job_labels(job: &str) -> Labels {
    vec![("job", job.to_owned())]
}

/// Per source split gauges: `value` lists an operator's `(split, value)`.
fn split_gauge<'a>(
    name: &'static str,
    help: &'static str,
    value: fn(&OperatorSnapshot) -> Vec<(&str, u64)>,
) -> Family<'a, f64> {
    Family {
        name,
        help,
        samples: Box::new(move |r: &'a JobReading| {
            r.snapshot
                .operators
                .iter()
                .flat_map(|o| {
                    value(o)
                        .into_iter()
                        .map(|(split, v)| (split_labels(&r.job, &o.operator_id, split), v as f64))
                })
                .collect()
        }),
    }
}

/// Per-subtask counters.
fn subtask_counter<'a>(
    name: &'static str,
    help: &'static str,
    value: fn(&SubtaskSnapshot) -> u64,
) -> Family<'a, u64> {
    Family {
        name,
        help,
        samples: Box::new(move |r: &'a JobReading| {
            r.subtasks
                .iter()
                .map(|s| (subtask_labels(&r.job, s), value(s)))
                .collect()
        }),
    }
}

/// Per-subtask gauges; `None` is no sample.
fn subtask_gauge<'a>(
    name: &'static str,
    help: &'static str,
    value: fn(&SubtaskSnapshot) -> Option<u64>,
) -> Family<'a, f64> {
    Family {
        name,
        help,
        samples: Box::new(move |r: &'a JobReading| {
            r.subtasks
                .iter()
                .filter_map(|s| value(s).map(|v| (subtask_labels(&r.job, s), v as f64)))
                .collect()
        }),
    }
}

/// Per-task values of the newest completed epoch, for the tasks that took part with a snapshot.
fn epoch_task_gauge<'a>(
    name: &'static str,
    help: &'static str,
    value: fn(&weir_runtime::TaskEpochStats) -> f64,
) -> Family<'a, f64> {
    Family {
        name,
        help,
        samples: Box::new(move |r: &'a JobReading| {
            r.last_epoch
                .iter()
                .flat_map(|e| &e.tasks)
                .filter(|t| t.state_entries.is_some())
                .map(|t| (task_labels(&r.job, &t.operator_id, t.subtask), value(t)))
                .collect()
        }),
    }
}

/// Values of the task a subtask heads (`operator` is its chain's first operator); `None` is no
/// sample.
fn task_value<'a>(
    name: &'static str,
    help: &'static str,
    value: impl Fn(&SubtaskSnapshot) -> Option<f64> + 'a,
) -> Family<'a, f64> {
    Family {
        name,
        help,
        samples: Box::new(move |r: &'a JobReading| {
            r.subtasks
                .iter()
                .filter(|s| s.heads_task)
                .filter_map(|s| value(s).map(|v| (subtask_labels(&r.job, s), v)))
                .collect()
        }),
    }
}

/// Per-operator counters kept by operator (not by subtask).
fn operator_counter<'a>(
    name: &'static str,
    help: &'static str,
    kind: Option<&'static str>,
    value: fn(&weir_runtime::OperatorSnapshot) -> u64,
) -> Family<'a, u64> {
    Family {
        name,
        help,
        samples: Box::new(move |r: &'a JobReading| {
            r.snapshot
                .operators
                .iter()
                .filter(|o| kind.is_none_or(|k| o.kind == k))
                .map(|o| {
                    let labels = vec![("job", r.job.clone()), ("operator", o.operator_id.clone())];
                    (labels, value(o))
                })
                .collect()
        }),
    }
}

/// Job-wide values; `None` is no sample (a job without checkpoints has no checkpoint metrics).
fn job_value<'a, V: 'a>(
    name: &'static str,
    help: &'static str,
    value: impl Fn(&JobReading) -> Option<V> + 'a,
) -> Family<'a, V> {
    Family {
        name,
        help,
        samples: Box::new(move |r: &'a JobReading| {
            value(r)
                .map(|v| (job_labels(&r.job), v))
                .into_iter()
                .collect()
        }),
    }
}

fn write_family<'a, V, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    readings: &'a [JobReading],
    family: &Family<'a, V>,
    metric_type: MetricType,
    make: impl Fn(V) -> M,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(family.name, family.help, None, metric_type)?;
    for r in readings {
        for (labels, v) in (family.samples)(r) {
            make(v).encode(metric.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

impl Collector for Readings {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let r = &self.0;
        let counters = [
            subtask_counter(
                "weir_operator_rows_in",
                "Rows the operator subtask received.",
                |s| s.rows_in,
            ),
            subtask_counter(
                "weir_operator_rows_out",
                "Rows the operator subtask emitted on its main output.",
                |s| s.rows_out,
            ),
            subtask_counter(
                "weir_operator_batches_in",
                "Batches the operator subtask received.",
                |s| s.batches_in,
            ),
            subtask_counter(
                "weir_operator_batches_out",
                "Batches the operator subtask emitted on its main output.",
                |s| s.batches_out,
            ),
            subtask_counter(
                "weir_operator_bytes_in",
                "Arrow memory size of the batches the operator subtask received, bytes.",
                |s| s.bytes_in,
            ),
            subtask_counter(
                "weir_operator_bytes_out",
                "Arrow memory size of the batches the operator subtask emitted, bytes.",
                |s| s.bytes_out,
            ),
            subtask_counter(
                "weir_operator_late_rows_routed",
                "Late rows the operator subtask routed to its late side output.",
                |s| s.late_routed,
            ),
            subtask_counter(
                "weir_operator_late_rows_updated",
                "Late rows that updated a result the operator subtask had emitted.",
                |s| s.late_updated,
            ),
            operator_counter(
                "weir_operator_dropped_rows",
                "Rows the operator dropped by policy (late rows, null event times).",
                None,
                |o| o.dropped,
            ),
            operator_counter(
                "weir_source_dead_letters",
                "Records the source sent to its dead-letter output.",
                Some("source"),
                |o| o.dead_letters,
            ),
            operator_counter(
                "weir_source_alignment_pauses",
                "Times a subtask of the source paused for watermark alignment.",
                Some("source"),
                |o| o.alignment_pauses,
            ),
            Family {
                name: "weir_source_split_rows_read",
                help: "Rows read from a source split (its read position, in rows).",
                samples: Box::new(|r: &JobReading| {
                    r.split_rows
                        .iter()
                        .map(|(operator, split, rows)| {
                            (split_labels(&r.job, operator, split), *rows)
                        })
                        .collect()
                }),
            },
            job_value(
                "weir_job_splits_assigned",
                "Source splits assigned to readers.",
                |r| Some(r.snapshot.splits_total),
            ),
            job_value(
                "weir_job_splits_done",
                "Source splits read to their end.",
                |r| Some(r.snapshot.splits_done),
            ),
            job_value(
                "weir_checkpoint_completed",
                "Epochs made durable in this run.",
                |r| r.checkpoints.as_ref().map(|c| c.completed),
            ),
            job_value(
                "weir_checkpoint_aborted",
                "Epochs aborted in this run (timeouts, storage failures).",
                |r| r.checkpoints.as_ref().map(|c| c.aborted),
            ),
            job_value(
                "weir_job_restarts",
                "Automatic restarts of the job's tasks after failures.",
                |r| r.checkpoints.as_ref().map(|c| u64::from(c.restarts)),
            ),
            job_value(
                "weir_checkpoint_triggered",
                "Epochs triggered in this run.",
                |r| r.checkpoints.as_ref().map(|c| c.triggered),
            ),
            Family {
                name: "weir_checkpoint_fenced_attempts",
                help: "Attempts fenced: older ones this run's attempts fenced as they started \
                       (fenced=\"older\"), or this run's own, fenced by a newer attempt \
                       (fenced=\"this\").",
                samples: Box::new(|r: &JobReading| {
                    r.checkpoints
                        .iter()
                        .flat_map(|c| {
                            [("older", c.fenced_older_attempts), ("this", c.fenced)].map(
                                |(which, n)| {
                                    let labels =
                                        vec![("job", r.job.clone()), ("fenced", which.to_owned())];
                                    (labels, n)
                                },
                            )
                        })
                        .collect()
                }),
            },
        ];
        for family in &counters {
            write_family(
                &mut encoder,
                r,
                family,
                MetricType::Counter,
                ConstCounter::new,
            )?;
        }
        let seconds = |ns: u64| ns as f64 / 1e9;
        let times = [
            task_value(
                "weir_task_idle_seconds",
                "Time the task waited for input: on its input channels, or for its source's \
                 reads and watermark alignment, seconds.",
                move |s| Some(seconds(s.idle_ns)),
            ),
            task_value(
                "weir_task_busy_seconds",
                "Time the task handled input (a source task: its reads polled and their rows \
                 handed on), less the time blocked on full output channels, seconds.",
                move |s| Some(seconds(s.busy_ns)),
            ),
            task_value(
                "weir_task_backpressured_seconds",
                "Time the task was blocked sending to a full output channel, seconds.",
                move |s| Some(seconds(s.backpressured_ns)),
            ),
        ];
        for family in &times {
            write_family(
                &mut encoder,
                r,
                family,
                MetricType::Counter,
                ConstCounter::new,
            )?;
        }
        let gauges = [
            split_gauge(
                "weir_source_split_backlog_records",
                "Records between a source split's cursor and its known end, as last reported.",
                |o| {
                    o.lag
                        .iter()
                        .map(|l| (l.split.as_str(), l.backlog))
                        .collect()
                },
            ),
            split_gauge(
                "weir_source_split_position_records",
                "The index of the next record to read from a source split (Kafka: the next offset).",
                |o| {
                    o.positions
                        .iter()
                        .map(|p| (p.split.as_str(), p.next_record))
                        .collect()
                },
            ),
            job_value(
                "weir_checkpoint_last_durable_epoch",
                "The newest durable epoch.",
                |r| {
                    r.checkpoints
                        .as_ref()
                        .and_then(|c| c.last_durable_epoch)
                        .map(|e| e as f64)
                },
            ),
            job_value(
                "weir_checkpoint_last_duration_seconds",
                "Trigger to commit of the newest durable epoch, seconds.",
                |r| {
                    r.checkpoints
                        .as_ref()
                        .and_then(|c| c.last_duration_ms)
                        .map(|ms| ms as f64 / 1000.0)
                },
            ),
            job_value(
                "weir_checkpoint_last_state_bytes",
                "State segment bytes of the newest durable epoch.",
                |r| {
                    r.checkpoints
                        .as_ref()
                        .and_then(|c| c.last_state_bytes)
                        .map(|b| b as f64)
                },
            ),
            job_value(
                "weir_checkpoint_pending_epochs",
                "Epochs triggered and not yet durable.",
                |r| r.checkpoints.as_ref().map(|c| c.pending_epochs as f64),
            ),
            job_value(
                "weir_checkpoint_pending_sink_transactions",
                "Sink transactions pre-committed and not yet committed.",
                |r| {
                    r.checkpoints
                        .as_ref()
                        .map(|c| c.pending_sink_transactions as f64)
                },
            ),
            Family {
                name: "weir_job_semantic_mode_info",
                help: "The delivery guarantee in force, as the mode label (value 1).",
                samples: Box::new(|r: &JobReading| {
                    r.semantic_mode
                        .map(|m| {
                            let labels =
                                vec![("job", r.job.clone()), ("mode", mode_name(m).to_owned())];
                            (labels, 1.0)
                        })
                        .into_iter()
                        .collect()
                }),
            },
            subtask_gauge(
                "weir_operator_state_entries",
                "Entries of the operator's state in the subtask's last checkpoint snapshot.",
                |s| s.state_entries,
            ),
            subtask_gauge(
                "weir_operator_state_bytes",
                "Bytes of the state segments of the operator subtask's last checkpoint snapshot.",
                |s| s.state_bytes,
            ),
            epoch_task_gauge(
                "weir_task_checkpoint_alignment_seconds",
                "First to last barrier at the task's input in the newest completed epoch, seconds.",
                |t| t.alignment_ms as f64 / 1000.0,
            ),
            epoch_task_gauge(
                "weir_task_checkpoint_state_bytes",
                "Bytes of the task's state snapshot in the newest completed epoch.",
                |t| t.state_bytes as f64,
            ),
        ];
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_millis() as f64);
        let watermarks = [
            task_value(
                "weir_task_input_watermark_milliseconds",
                "The task's current input watermark (event time, ms since the epoch).",
                |s| s.watermark_ms.map(|w| w as f64),
            ),
            task_value(
                "weir_task_watermark_lag_seconds",
                "Wall-clock time now minus the task's current input watermark, seconds.",
                move |s| s.watermark_ms.map(|w| (now_ms - w as f64) / 1000.0),
            ),
        ];
        for family in gauges.iter().chain(&watermarks) {
            write_family(&mut encoder, r, family, MetricType::Gauge, ConstGauge::new)?;
        }
        Ok(())
    }
}
