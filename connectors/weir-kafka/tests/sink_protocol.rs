//! The exactly-once sink's protocol against a real broker, one crash point at a time: a sink
//! instance that "dies" (is dropped) after its pre-commit, in the middle of its transaction, or
//! after its commit, and a new instance (a restarted process) that recovers from the same
//! pre-commit values. A read_committed consumer must see every row exactly once.

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::local::LocalFileSystem;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::sync::Arc;
use std::time::Duration;
use weir_api::{
    BadRecordPolicy, ConnectorSpec, Epoch, OperatorId, PreparedSink, SinkFactory, SinkStaging,
    SubtaskIndex, TaskContext,
};
use weir_kafka::KafkaSinkFactory;
use weir_testkit::kafka::KafkaBroker;
use weir_testkit::unique_name;

struct Setup {
    broker: &'static KafkaBroker,
    topic: String,
    prefix: String,
    _dir: tempfile::TempDir,
    ctx: TaskContext,
    schema: Arc<Schema>,
}

fn setup() -> Setup {
    let broker = KafkaBroker::shared().expect("the Kafka test broker");
    let topic = unique_name("eo-out");
    broker.create_topic(&topic, 2).expect("topic");
    let dir = tempfile::tempdir().expect("tmp");
    let store = LocalFileSystem::new_with_prefix(dir.path()).expect("store");
    let ctx = TaskContext {
        staging: Some(SinkStaging {
            store: Arc::new(store),
            dir: object_store::path::Path::from("staging/out/0"),
            local_root: Some(dir.path().to_path_buf()),
        }),
        ..TaskContext::new("job".into(), "out".into(), SubtaskIndex(0), 1)
    };
    Setup {
        broker,
        topic,
        prefix: unique_name("eo"),
        _dir: dir,
        ctx,
        schema: Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
    }
}

impl Setup {
    /// A new sink instance, as a restarted process prepares it.
    async fn sink(&self) -> Arc<dyn PreparedSink> {
        let options = serde_json::json!({
            "topic": self.topic,
            "properties.bootstrap.servers": self.broker.bootstrap_servers(),
            "format": "json",
            "sink.delivery-guarantee": "exactly-once",
            "sink.transactional-id-prefix": self.prefix,
        });
        KafkaSinkFactory
            .prepare(
                ConnectorSpec {
                    operator_id: &OperatorId::new("out"),
                    options: &options,
                    options_path: "sinks[0].options",
                    schema: None,
                    bad_records: BadRecordPolicy::Fail,
                    reach: weir_api::Reach::Full,
                },
                self.schema.clone(),
            )
            .await
            .expect("prepares")
    }

    fn batch(&self, ids: std::ops::Range<i64>) -> RecordBatch {
        RecordBatch::try_new(
            self.schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(ids))],
        )
        .expect("batch")
    }

    /// Writes `ids` as epoch `epoch` and returns the pre-commit value.
    async fn pre_commit(
        &self,
        sink: &Arc<dyn PreparedSink>,
        epoch: u64,
        ids: std::ops::Range<i64>,
    ) -> serde_json::Value {
        let mut writer = sink.create_writer(&self.ctx).await.expect("writer");
        writer.begin_epochs().await.expect("epoch mode");
        writer.write_batch(self.batch(ids)).await.expect("writes");
        writer.pre_commit(Epoch(epoch)).await.expect("pre-commits")
    }

    fn committed_ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .broker
            .read_committed(&self.topic)
            .expect("reads")
            .into_iter()
            .map(|r| {
                let v: serde_json::Value =
                    serde_json::from_slice(r.value.as_deref().unwrap_or_default()).expect("json");
                v["id"].as_i64().expect("id")
            })
            .collect();
        ids.sort_unstable();
        ids
    }

    fn transactional_id(&self) -> String {
        format!("{}-job-out-0", self.prefix)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_pre_commit_is_committed_by_recovery() {
    let s = setup();
    let first = s.sink().await;
    let pre = s.pre_commit(&first, 1, 0..100).await;
    drop(first); // the process dies before the commit
    assert!(
        s.committed_ids().is_empty(),
        "nothing visible before the commit"
    );
    let recovered = s.sink().await;
    recovered
        .commit_epoch(&s.ctx, std::slice::from_ref(&pre))
        .await
        .expect("recovery commits");
    assert_eq!(s.committed_ids(), (0..100).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_commit_is_not_committed_twice() {
    let s = setup();
    let first = s.sink().await;
    let pre1 = s.pre_commit(&first, 1, 0..50).await;
    first
        .commit_epoch(&s.ctx, std::slice::from_ref(&pre1))
        .await
        .expect("commits");
    let pre2 = s.pre_commit(&first, 2, 50..80).await;
    first
        .commit_epoch(&s.ctx, std::slice::from_ref(&pre2))
        .await
        .expect("commits");
    drop(first); // dies after the commit, before recording it
    let recovered = s.sink().await;
    recovered
        .commit_epoch(&s.ctx, &[pre1, pre2])
        .await
        .expect("recovery finds both committed");
    assert_eq!(s.committed_ids(), (0..80).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_in_the_middle_of_the_transaction_is_aborted_and_produced_again() {
    let s = setup();
    let first = s.sink().await;
    let pre = s.pre_commit(&first, 1, 0..60).await;
    // The dying process had begun the transaction and produced part of the epoch (and even
    // its marker) when it was killed: a producer with the same transactional id that never
    // commits.
    let producer: BaseProducer = s
        .broker
        .client_config()
        .set("transactional.id", s.transactional_id())
        .create()
        .expect("producer");
    producer
        .init_transactions(Duration::from_secs(30))
        .expect("init");
    producer.begin_transaction().expect("begin");
    for id in 0..30 {
        producer
            .send(BaseRecord::<(), String>::to(&s.topic).payload(&format!(r#"{{"id":{id}}}"#)))
            .expect("queued");
    }
    producer.flush(Duration::from_secs(30)).expect("flushed");
    // Killed: no commit, no abort.
    std::mem::forget(producer);
    drop(first);

    let recovered = s.sink().await;
    recovered
        .commit_epoch(&s.ctx, std::slice::from_ref(&pre))
        .await
        .expect("recovery fences and commits");
    assert_eq!(s.committed_ids(), (0..60).collect::<Vec<_>>());
    // Recovery deletes what it no longer needs.
    recovered
        .abort_uncommitted(&s.ctx, &[])
        .await
        .expect("cleans up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epochs_that_never_became_durable_are_discarded() {
    let s = setup();
    let first = s.sink().await;
    let durable = s.pre_commit(&first, 1, 0..10).await;
    let _lost = s.pre_commit(&first, 2, 10..20).await; // its manifest was never written
    drop(first);
    let recovered = s.sink().await;
    recovered
        .commit_epoch(&s.ctx, std::slice::from_ref(&durable))
        .await
        .expect("commits the durable epoch");
    recovered
        .abort_uncommitted(&s.ctx, &[])
        .await
        .expect("deletes the rest");
    assert_eq!(s.committed_ids(), (0..10).collect::<Vec<_>>());
    let staging = s.ctx.staging.as_ref().expect("staging");
    let left: Vec<_> =
        futures::TryStreamExt::try_collect::<Vec<_>>(staging.store.list(Some(&staging.dir)))
            .await
            .expect("lists");
    assert!(left.is_empty(), "staged files left: {left:?}");
}
