//! A prepared source whose every read batch goes through one function: what computed columns
//! and source projections wrap a connector's source in. Everything else (splits, capabilities,
//! discovery, dead letters) is the connector's.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
use weir_api::{
    Boundedness, PreparedSource, Result, SourceCapability, SourceSplit, SplitBatch, SplitReader,
    TaskContext,
};

/// What a [`MappedSource`] does to each batch its connector reads.
pub(crate) trait BatchMap: std::fmt::Debug + Send + Sync + 'static {
    /// The schema of the mapped batches.
    fn schema(&self) -> SchemaRef;

    /// What the map adds to the connector's line in plans (`computed: ts AS ...`).
    fn describe(&self) -> String;

    /// Maps one batch of the connector's rows.
    ///
    /// # Errors
    /// Whatever the map cannot do with the batch; the job fails with it.
    fn apply(&self, batch: RecordBatch) -> Result<RecordBatch>;
}

/// `inner` with `map` applied to every batch its readers return.
pub(crate) fn mapped(
    inner: Arc<dyn PreparedSource>,
    map: impl BatchMap,
) -> Arc<dyn PreparedSource> {
    Arc::new(MappedSource {
        inner,
        map: Arc::new(map),
    })
}

#[derive(Debug)]
struct MappedSource<M> {
    inner: Arc<dyn PreparedSource>,
    map: Arc<M>,
}

#[async_trait::async_trait]
impl<M: BatchMap> PreparedSource for MappedSource<M> {
    fn schema(&self) -> SchemaRef {
        self.map.schema()
    }

    fn capabilities(&self) -> Vec<SourceCapability> {
        self.inner.capabilities()
    }

    fn boundedness(&self) -> Boundedness {
        self.inner.boundedness()
    }

    fn describe(&self) -> String {
        format!("{}; {}", self.inner.describe(), self.map.describe())
    }

    async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
        self.inner.enumerate_splits().await
    }

    async fn open_split(
        &self,
        split: &SourceSplit,
        ctx: &TaskContext,
    ) -> Result<Box<dyn SplitReader>> {
        Ok(Box::new(MappedReader {
            inner: self.inner.open_split(split, ctx).await?,
            map: Arc::clone(&self.map),
        }))
    }

    fn reads_splits_concurrently(&self) -> bool {
        self.inner.reads_splits_concurrently()
    }

    fn splits_are_one_stream(&self) -> bool {
        self.inner.splits_are_one_stream()
    }

    fn touches(&self) -> Vec<weir_api::Touch> {
        self.inner.touches()
    }

    fn discovery_interval(&self) -> Option<std::time::Duration> {
        self.inner.discovery_interval()
    }

    async fn discover_splits(&self) -> Result<Vec<SourceSplit>> {
        self.inner.discover_splits().await
    }
}

/// A split reader of a [`MappedSource`]; dead letters pass through unchanged.
struct MappedReader<M> {
    inner: Box<dyn SplitReader>,
    map: Arc<M>,
}

#[async_trait::async_trait]
impl<M: BatchMap> SplitReader for MappedReader<M> {
    async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
        let Some(mut read) = self.inner.next_batch().await? else {
            return Ok(None);
        };
        read.data = self.map.apply(read.data)?;
        Ok(Some(read))
    }
}
