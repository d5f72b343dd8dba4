//! The Kafka sink: exactly-once through one Kafka transaction per checkpoint epoch, published
//! from output staged in the checkpoint store; at-least-once by flushing at barriers.
//!
//! Exactly-once, per sink subtask, with transactional id `{prefix}-{job}-{operator}-{subtask}`:
//! 1. rows of epoch N are kept in memory; at barrier N (pre-commit) they are written as one
//!    Arrow IPC file to the subtask's staging directory in the checkpoint store, made durable,
//!    and the file's name goes into the epoch's manifest;
//! 2. once the manifest of N is durable, the commit runs one transaction that produces the
//!    staged records of every pending epoch up to N and a marker `(transactional id, N)` to the
//!    sink's epoch topic, then commits;
//! 3. recovery repeats step 2 for the restored manifest's pending epochs: a new producer with
//!    the same transactional id fences the old one (its open transaction is aborted), the epoch
//!    topic tells whether N's transaction committed before the crash, and only if it did not is
//!    N produced again from its staged file. Staged files are deleted once committed.
//!
//! librdkafka cannot resume another producer's transaction, which is why the output is staged:
//! a crash between "manifest durable" and "committed" loses nothing and duplicates nothing.

use crate::client::{CALL_TIMEOUT, METADATA_TIMEOUT, blocking, client_config, kafka_error};
use crate::epoch_topic::{self, EpochMarker};
use crate::format::{RecordEncoder, RecordLayout};
use crate::options::{Delivery, RawOptions, SINK_OPTIONS, SinkOptions};
use crate::producer::{DeliveryContext, Producer, Target, produce_batch};
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer as _};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use weir_api::{
    ConnectorSpec, Epoch, Error, PreparedSink, Result, SinkCapability, SinkFactory, SinkStaging,
    SinkWriter, TaskContext,
};

/// Prepares `kafka` sinks (docs/connectors/kafka.md).
#[derive(Debug, Default, Clone, Copy)]
pub struct KafkaSinkFactory;

/// Prepares `upsert-kafka` sinks: each row is written as its key's latest value, a delete as a
/// tombstone (docs/connectors/kafka.md, "Changes").
#[derive(Debug, Default, Clone, Copy)]
pub struct UpsertKafkaSinkFactory;

#[async_trait::async_trait]
impl SinkFactory for KafkaSinkFactory {
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        prepare(spec, input_schema, false)
    }
}

#[async_trait::async_trait]
impl SinkFactory for UpsertKafkaSinkFactory {
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        prepare(spec, input_schema, true)
    }
}

/// A Kafka sink of `spec` for rows of `input_schema`, an upsert topic's with `upsert`.
fn prepare(
    spec: ConnectorSpec<'_>,
    input_schema: SchemaRef,
    upsert: bool,
) -> Result<Arc<dyn PreparedSink>> {
    let raw = RawOptions::parse(spec.options, spec.options_path, SINK_OPTIONS)?;
    let options = SinkOptions::parse(&raw)?;
    let data = Arc::new(arrow::datatypes::Schema::new(
        weir_api::changelog::data_fields(&input_schema),
    ));
    let layout = raw.layout(&data, true, upsert)?;
    // Builds an encoder once, so that a layout that does not fit the schema fails now.
    RecordEncoder::new(input_schema.clone(), layout.clone())?;
    Ok(Arc::new(KafkaSink {
        options: Arc::new(options),
        schema: input_schema,
        layout,
        transactions: tokio::sync::Mutex::new(HashMap::new()),
        epoch_topic_ready: tokio::sync::OnceCell::new(),
        partitions: tokio::sync::OnceCell::new(),
    }))
}

/// A prepared Kafka sink, shared by its subtasks.
#[derive(Debug)]
pub(crate) struct KafkaSink {
    options: Arc<SinkOptions>,
    schema: SchemaRef,
    layout: RecordLayout,
    /// Exactly-once: the transactional producer of each subtask of this process, by
    /// transactional id.
    transactions: tokio::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Transactional>>>>,
    epoch_topic_ready: tokio::sync::OnceCell<()>,
    /// The topic's partition count, read once (by the first writer or commit).
    partitions: tokio::sync::OnceCell<i32>,
}

/// A transactional producer and what it knows of its committed epochs.
struct Transactional {
    producer: Arc<Producer>,
    /// The newest epoch committed under this transactional id.
    last_committed: Option<u64>,
    /// Set between begin and commit: a producer found so was interrupted mid-transaction and
    /// is replaced (which aborts that transaction).
    in_transaction: bool,
}

impl std::fmt::Debug for Transactional {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactional")
            .field("last_committed", &self.last_committed)
            .field("in_transaction", &self.in_transaction)
            .finish_non_exhaustive()
    }
}

/// What a pre-commit records in the manifest for one epoch of one subtask.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PreCommit {
    transactional_id: String,
    epoch: u64,
    /// The staged file's name in the subtask's staging directory (`None`: no rows).
    staged: Option<String>,
    records: u64,
}

/// The staged file of `epoch`.
fn staged_name(epoch: u64) -> String {
    format!("epoch-{epoch:020}.arrow")
}

fn staging_of(ctx: &TaskContext) -> Result<&SinkStaging> {
    ctx.staging.as_ref().ok_or_else(|| {
        Error::Internal(format!(
            "{}: an exactly-once kafka sink needs the checkpoint store to stage its output",
            ctx.label()
        ))
    })
}

impl KafkaSink {
    /// `{prefix}-{job}-{operator}-{subtask}`: stable across restarts, never random.
    fn transactional_id(&self, ctx: &TaskContext) -> String {
        format!(
            "{}-{}-{}-{}",
            self.options
                .transactional_id_prefix
                .as_deref()
                .unwrap_or("weir"),
            ctx.job_id,
            ctx.operator_id,
            ctx.subtask.0
        )
    }

    fn servers(&self) -> &str {
        &self.options.bootstrap_servers
    }

    /// A producer: transactional when `transactional_id` is given (its transactions
    /// initialized, which fences every older producer of that id and aborts its open
    /// transaction).
    async fn producer(&self, transactional_id: Option<&str>) -> Result<Arc<Producer>> {
        let servers = self.servers().to_owned();
        let mut fixed = vec![("enable.idempotence", "true")];
        if let Some(id) = transactional_id {
            fixed.push(("transactional.id", id));
        }
        let producer: Producer = client_config(&servers, &self.options.properties, &fixed)
            .create_with_context(DeliveryContext::default())
            .map_err(|e| kafka_error("creating a producer", &servers, &e))?;
        let producer = Arc::new(producer);
        if let Some(id) = transactional_id {
            let p = producer.clone();
            let id = id.to_owned();
            blocking("initializing kafka transactions", move || {
                p.init_transactions(CALL_TIMEOUT).map_err(|e| {
                    kafka_error(format!("initializing transactions of `{id}`"), &servers, &e)
                })
            })
            .await?;
        }
        Ok(producer)
    }

    /// The topic's partition count, which also checks that the topic exists; read from the
    /// cluster once per sink.
    async fn partitions(&self) -> Result<i32> {
        self.partitions
            .get_or_try_init(|| self.fetch_partitions())
            .await
            .copied()
    }

    async fn fetch_partitions(&self) -> Result<i32> {
        let servers = self.servers().to_owned();
        let topic = self.options.topic.clone();
        let properties = self.options.properties.clone();
        blocking("listing kafka partitions", move || {
            let consumer: rdkafka::consumer::BaseConsumer =
                client_config(&servers, &properties, &[("group.id", "weir-sink")])
                    .create()
                    .map_err(|e| kafka_error("creating a client", &servers, &e))?;
            let metadata = rdkafka::consumer::Consumer::fetch_metadata(
                &consumer,
                Some(&topic),
                METADATA_TIMEOUT,
            )
            .map_err(|e| {
                kafka_error(format!("listing the partitions of `{topic}`"), &servers, &e)
            })?;
            match metadata.topics().iter().find(|t| t.name() == topic) {
                Some(t) if t.error().is_none() => {
                    Ok(i32::try_from(t.partitions().len()).unwrap_or(i32::MAX))
                }
                _ => Err(Error::external(
                    "kafka",
                    format!("writing to topic `{topic}` (bootstrap servers {servers})"),
                    "the topic does not exist",
                    false,
                )),
            }
        })
        .await
    }

    async fn target(&self, ctx: &TaskContext) -> Result<Target> {
        Ok(Target {
            topic: self.options.topic.clone(),
            partitioner: self.options.partitioner,
            partitions: self.partitions().await?,
            subtask: ctx.subtask.0,
            next: AtomicUsize::new(0),
        })
    }

    /// The transactional state of `id`: the live one, or a new producer (fencing older ones)
    /// whose committed epoch is read from the epoch topic.
    async fn transactional(&self, id: &str) -> Result<Arc<tokio::sync::Mutex<Transactional>>> {
        let mut all = self.transactions.lock().await;
        if let Some(t) = all.get(id)
            && !t.lock().await.in_transaction
        {
            return Ok(t.clone());
        }
        all.remove(id);
        self.epoch_topic_ready
            .get_or_try_init(|| {
                epoch_topic::ensure(
                    self.servers(),
                    &self.options.properties,
                    &self.options.epoch_topic,
                )
            })
            .await?;
        let producer = self.producer(Some(id)).await?;
        let (servers, properties, topic, tid) = (
            self.servers().to_owned(),
            self.options.properties.clone(),
            self.options.epoch_topic.clone(),
            id.to_owned(),
        );
        let last_committed = blocking("reading the epoch topic", move || {
            epoch_topic::last_committed(&servers, &properties, &topic, &tid)
        })
        .await?;
        let state = Arc::new(tokio::sync::Mutex::new(Transactional {
            producer,
            last_committed,
            in_transaction: false,
        }));
        all.insert(id.to_owned(), state.clone());
        Ok(state)
    }

    /// Produces the staged records of `epochs` and the marker of the newest in one
    /// transaction, and commits it.
    async fn publish(
        &self,
        ctx: &TaskContext,
        state: &mut Transactional,
        id: &str,
        epochs: &[PreCommit],
    ) -> Result<()> {
        let staging = staging_of(ctx)?;
        let servers = self.servers();
        let newest = epochs.iter().map(|e| e.epoch).max().unwrap_or(0);
        let target = self.target(ctx).await?;
        let mut encoder = RecordEncoder::new(self.schema.clone(), self.layout.clone())?;
        state.in_transaction = true;
        state
            .producer
            .begin_transaction()
            .map_err(|e| kafka_error(format!("beginning a transaction of `{id}`"), servers, &e))?;
        for epoch in epochs {
            let Some(name) = &epoch.staged else { continue };
            for batch in read_staged(staging, name).await? {
                produce_batch(&state.producer, &mut encoder, &target, &batch).await?;
            }
        }
        let marker = serde_json::to_vec(&EpochMarker { epoch: newest })
            .map_err(|e| Error::Internal(format!("encoding an epoch marker: {e}")))?;
        loop {
            let record = BaseRecord::to(&self.options.epoch_topic)
                .key(id.as_bytes())
                .payload(&marker);
            match state.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
                Err((e, _)) => return Err(kafka_error("producing an epoch marker", servers, &e)),
            }
        }
        let producer = state.producer.clone();
        let (servers_owned, tid) = (servers.to_owned(), id.to_owned());
        blocking("committing a kafka transaction", move || {
            producer.commit_transaction(CALL_TIMEOUT).map_err(|e| {
                kafka_error(
                    format!("committing the transaction of `{tid}`"),
                    &servers_owned,
                    &e,
                )
            })
        })
        .await?;
        if let Some(e) = state.producer.context().take_error() {
            return Err(Error::external(
                "kafka",
                format!("delivering the transaction of `{id}`"),
                e,
                true,
            ));
        }
        state.in_transaction = false;
        state.last_committed = Some(newest);
        Ok(())
    }
}

/// Reads a staged file's batches.
async fn read_staged(staging: &SinkStaging, name: &str) -> Result<Vec<RecordBatch>> {
    let location = staging.dir.clone().join(name);
    let failed = |e: &dyn std::fmt::Display| {
        Error::external(
            "object store",
            format!("reading staged output {location}"),
            e,
            true,
        )
    };
    let bytes = staging
        .store
        .get(&location)
        .await
        .map_err(|e| failed(&e))?
        .bytes()
        .await
        .map_err(|e| failed(&e))?;
    let reader = FileReader::try_new(std::io::Cursor::new(bytes), None).map_err(|e| failed(&e))?;
    reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| failed(&e))
}

/// Deletes the staged files in `staging` that `keep` does not name.
async fn delete_staged(staging: &SinkStaging, keep: &[String]) -> Result<()> {
    let listed: Vec<_> = staging
        .store
        .list(Some(&staging.dir))
        .try_collect()
        .await
        .map_err(|e| {
            Error::external("object store", format!("listing {}", staging.dir), e, true)
        })?;
    for object in listed {
        let name = object.location.filename().unwrap_or_default();
        if keep.iter().any(|k| k == name) {
            continue;
        }
        match staging.store.delete(&object.location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                return Err(Error::external(
                    "object store",
                    format!("deleting staged output {}", object.location),
                    e,
                    true,
                ));
            }
        }
    }
    Ok(())
}

fn parse_pre_commits(ctx: &TaskContext, values: &[serde_json::Value]) -> Result<Vec<PreCommit>> {
    values
        .iter()
        .map(|v| {
            serde_json::from_value(v.clone()).map_err(|e| {
                Error::Internal(format!(
                    "{}: a kafka pre-commit in the checkpoint cannot be read: {e}",
                    ctx.label()
                ))
            })
        })
        .collect()
}

#[async_trait::async_trait]
impl PreparedSink for KafkaSink {
    fn touches(&self) -> Vec<weir_api::Touch> {
        crate::client::broker_touches(&self.options.bootstrap_servers)
    }

    fn capabilities(&self) -> Vec<SinkCapability> {
        match self.options.delivery {
            Delivery::ExactlyOnce => vec![SinkCapability::TwoPhaseCommit],
            Delivery::AtLeastOnce => vec![SinkCapability::AtLeastOnce],
            Delivery::None => vec![SinkCapability::BestEffort],
        }
    }

    fn accepts_changes(&self) -> bool {
        self.layout.changelog() != crate::format::Changelog::Inserts
    }

    fn describe(&self) -> String {
        let guarantee = match self.options.delivery {
            Delivery::ExactlyOnce => "exactly-once",
            Delivery::AtLeastOnce => "at-least-once",
            Delivery::None => "none",
        };
        format!(
            "kafka: {} at {} ({guarantee})",
            self.options.topic, self.options.bootstrap_servers
        )
    }

    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        let target = self.target(ctx).await?;
        let producer = self.producer(None).await?;
        Ok(Box::new(KafkaWriter {
            producer,
            encoder: RecordEncoder::new(self.schema.clone(), self.layout.clone())?,
            target,
            servers: self.options.bootstrap_servers.clone(),
            flush_at_barriers: self.options.delivery == Delivery::AtLeastOnce,
            epochs: None,
            transactional_id: self.transactional_id(ctx),
            staging: ctx.staging.clone(),
            schema: self.schema.clone(),
        }))
    }

    async fn commit_epoch(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        let pre_commits = parse_pre_commits(task, transactions)?;
        let id = self.transactional_id(task);
        let state = self.transactional(&id).await?;
        let mut state = state.lock().await;
        let done = state.last_committed.unwrap_or(0);
        let todo: Vec<PreCommit> = pre_commits
            .iter()
            .filter(|p| p.epoch > done)
            .cloned()
            .collect();
        if !todo.is_empty()
            && let Err(e) = self.publish(task, &mut state, &id, &todo).await
        {
            drop(state);
            // The next call starts over with a new producer, which aborts this transaction.
            self.transactions.lock().await.remove(&id);
            return Err(e);
        }
        delete_staged_of(task, &pre_commits).await;
        Ok(())
    }

    async fn abort_uncommitted(
        &self,
        task: &TaskContext,
        keep: &[serde_json::Value],
    ) -> Result<()> {
        if self.options.delivery != Delivery::ExactlyOnce {
            return Ok(());
        }
        // Fences the subtask's older producers: their open transaction is aborted.
        let id = self.transactional_id(task);
        self.transactional(&id).await?;
        let keep: Vec<String> = parse_pre_commits(task, keep)?
            .into_iter()
            .filter_map(|p| p.staged)
            .collect();
        delete_staged(staging_of(task)?, &keep).await
    }
}

/// Deletes the staged files of committed epochs; a failure only leaves files that the next
/// recovery deletes.
async fn delete_staged_of(task: &TaskContext, committed: &[PreCommit]) {
    let Some(staging) = &task.staging else { return };
    for name in committed.iter().filter_map(|p| p.staged.as_ref()) {
        let location = staging.dir.clone().join(name.as_str());
        match staging.store.delete(&location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                tracing::warn!(file = %location, error = %e, "deleting committed staged output failed")
            }
        }
    }
}

/// The writer of one sink subtask.
struct KafkaWriter {
    producer: Arc<Producer>,
    encoder: RecordEncoder,
    target: Target,
    servers: String,
    flush_at_barriers: bool,
    /// Exactly-once in epoch mode: the rows of the open epoch.
    epochs: Option<Vec<RecordBatch>>,
    transactional_id: String,
    staging: Option<SinkStaging>,
    schema: SchemaRef,
}

impl KafkaWriter {
    async fn flush(&self) -> Result<()> {
        let producer = self.producer.clone();
        let servers = self.servers.clone();
        let topic = self.target.topic.clone();
        blocking("flushing a kafka producer", move || {
            producer
                .flush(CALL_TIMEOUT)
                .map_err(|e| kafka_error(format!("flushing records to `{topic}`"), &servers, &e))
        })
        .await?;
        match self.producer.context().take_error() {
            Some(e) => Err(Error::external(
                "kafka",
                format!("delivering records to `{}`", self.target.topic),
                e,
                true,
            )),
            None => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl SinkWriter for KafkaWriter {
    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        match &mut self.epochs {
            Some(open) => {
                if batch.num_rows() > 0 {
                    open.push(batch);
                }
                Ok(())
            }
            None => {
                produce_batch(&self.producer, &mut self.encoder, &self.target, &batch).await?;
                Ok(())
            }
        }
    }

    async fn finish(&mut self) -> Result<()> {
        if self.epochs.is_none() {
            self.flush().await?;
        }
        Ok(())
    }

    async fn begin_epochs(&mut self) -> Result<()> {
        if self.staging.is_none() {
            return Err(Error::Internal(
                "an exactly-once kafka sink in epoch mode needs a staging directory".into(),
            ));
        }
        self.epochs = Some(Vec::new());
        Ok(())
    }

    async fn pre_commit(&mut self, epoch: Epoch) -> Result<serde_json::Value> {
        let batches = self.epochs.replace(Vec::new()).unwrap_or_default();
        let records: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let staged = if records == 0 {
            None
        } else {
            let staging = self
                .staging
                .clone()
                .ok_or_else(|| Error::Internal("no staging directory".into()))?;
            let name = staged_name(epoch.0);
            let location = staging.dir.clone().join(name.as_str());
            let bytes = encode_ipc(&self.schema, &batches)?;
            staging
                .store
                .put(&location, bytes.into())
                .await
                .map_err(|e| {
                    Error::external(
                        "object store",
                        format!("staging output at {location}"),
                        e,
                        true,
                    )
                })?;
            let synced = staging.clone();
            blocking("syncing staged output", move || {
                synced.sync_local(&location)
            })
            .await?;
            Some(name)
        };
        serde_json::to_value(PreCommit {
            transactional_id: self.transactional_id.clone(),
            epoch: epoch.0,
            staged,
            records: records as u64,
        })
        .map_err(|e| Error::Internal(format!("encoding a kafka pre-commit: {e}")))
    }

    async fn flush_at_barrier(&mut self, _epoch: Epoch) -> Result<()> {
        if self.flush_at_barriers {
            self.flush().await?;
        }
        Ok(())
    }
}

/// One Arrow IPC file of `batches`.
fn encode_ipc(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let failed = |e| Error::arrow("staging kafka output as Arrow IPC", e);
    let mut writer = FileWriter::try_new(Vec::new(), schema).map_err(failed)?;
    for b in batches {
        writer.write(b).map_err(failed)?;
    }
    writer.into_inner().map_err(failed)
}
