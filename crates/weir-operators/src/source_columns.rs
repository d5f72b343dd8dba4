//! A source's `columns`: the connector columns a job reads. The connector is asked to read only
//! those ([`PreparedSource::project`], projection pushdown); one that cannot is wrapped so that
//! every batch it reads is cut down to them before anything downstream sees it. A source of
//! changes keeps its row kind column whatever the columns are.

use crate::mapped_source::{BatchMap, mapped};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
use weir_api::{Error, PreparedSource, Result};

/// `source` reading only `columns` (names of its schema, written at `origin`, e.g.
/// `sources[0]`): the connector's own projection where it has one, otherwise a wrapper that
/// drops the other columns after every read. The columns come out in the schema's order. All
/// of them: `source` as it is.
///
/// # Errors
/// `<origin>.columns[j]` and a config error for a name that is not a column of the source; an
/// error naming the connector when its projection has the wrong schema.
pub fn with_columns(
    source: Arc<dyn PreparedSource>,
    columns: &[String],
    origin: &str,
) -> std::result::Result<Arc<dyn PreparedSource>, (String, Error)> {
    let schema = source.schema();
    let mut indices = Vec::with_capacity(columns.len());
    for (j, name) in columns.iter().enumerate() {
        let Ok(index) = schema.index_of(name) else {
            let path = format!("{origin}.columns[{j}]");
            let known: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            let message = format!(
                "`{name}` is not a column of the source (columns: {})",
                known.join(", ")
            );
            return Err((path.clone(), Error::config(path, message)));
        };
        indices.push(index);
    }
    // The row kinds of a source of changes are never cut away: its rows mean nothing without.
    if let Some(kinds) = weir_api::changelog::row_kind_index(&schema) {
        indices.push(kinds);
    }
    indices.sort_unstable();
    indices.dedup();
    if indices.len() == schema.fields().len() {
        return Ok(source);
    }
    let projected = schema.project(&indices).map(Arc::new).map_err(|e| {
        (
            origin.to_owned(),
            Error::arrow("projecting the source schema", e),
        )
    })?;
    match source.project(&indices) {
        Some(narrow) if narrow.schema() == projected => Ok(narrow),
        Some(narrow) => {
            let path = format!("{origin}.columns");
            let message = format!(
                "the connector `{}` read columns {:?} as {}, not as {projected}",
                source.describe(),
                columns,
                narrow.schema()
            );
            Err((path.clone(), Error::config(path, message)))
        }
        None => Ok(mapped(
            source,
            Projection {
                indices,
                schema: projected,
            },
        )),
    }
}

/// Keeps some columns of every batch.
#[derive(Debug)]
struct Projection {
    indices: Vec<usize>,
    schema: SchemaRef,
}

impl BatchMap for Projection {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn describe(&self) -> String {
        let names: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        format!("columns: {}", names.join(", "))
    }

    fn apply(&self, batch: RecordBatch) -> Result<RecordBatch> {
        batch
            .project(&self.indices)
            .map_err(|e| Error::arrow("dropping the columns the job does not read", e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use weir_api::{
        Boundedness, SourceCapability, SourceSplit, SplitBatch, SplitCursor, SplitReader,
        TaskContext,
    };

    /// A one-split source of columns a, b, c, that can project or not.
    #[derive(Debug)]
    struct Abc {
        schema: SchemaRef,
        projects: bool,
    }

    fn abc(projects: bool) -> Arc<dyn PreparedSource> {
        let fields: Vec<Field> = ["a", "b", "c"]
            .iter()
            .map(|n| Field::new(*n, DataType::Int64, false))
            .collect();
        Arc::new(Abc {
            schema: Arc::new(Schema::new(fields)),
            projects,
        })
    }

    struct Once(Option<RecordBatch>);

    #[async_trait::async_trait]
    impl SplitReader for Once {
        async fn next_batch(&mut self) -> Result<Option<SplitBatch>> {
            Ok(self.0.take().map(|data| SplitBatch {
                data,
                dead_letters: None,
                cursor: SplitCursor { next_record: 1 },
                backlog: None,
            }))
        }
    }

    #[async_trait::async_trait]
    impl PreparedSource for Abc {
        fn schema(&self) -> SchemaRef {
            Arc::clone(&self.schema)
        }
        fn capabilities(&self) -> Vec<SourceCapability> {
            vec![SourceCapability::Replayable]
        }
        fn boundedness(&self) -> Boundedness {
            Boundedness::Bounded
        }
        fn describe(&self) -> String {
            "abc".into()
        }
        async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
            Ok(vec![SourceSplit {
                id: "only".into(),
                cursor: SplitCursor::default(),
                size_bytes: None,
                range: None,
            }])
        }
        async fn open_split(
            &self,
            _: &SourceSplit,
            _: &TaskContext,
        ) -> Result<Box<dyn SplitReader>> {
            let columns: Vec<ArrayRef> = (0..self.schema.fields().len())
                .map(|i| Arc::new(Int64Array::from(vec![i as i64])) as ArrayRef)
                .collect();
            let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns).unwrap();
            Ok(Box::new(Once(Some(batch))))
        }
        fn project(&self, indices: &[usize]) -> Option<Arc<dyn PreparedSource>> {
            self.projects.then(|| {
                Arc::new(Abc {
                    schema: Arc::new(self.schema.project(indices).unwrap()),
                    projects: true,
                }) as Arc<dyn PreparedSource>
            })
        }
    }

    fn names(source: &dyn PreparedSource) -> Vec<String> {
        source
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    async fn first_batch(source: &dyn PreparedSource) -> RecordBatch {
        let split = source.enumerate_splits().await.unwrap().remove(0);
        let ctx = TaskContext::new("j".into(), "s".into(), weir_api::SubtaskIndex(0), 1);
        let mut reader = source.open_split(&split, &ctx).await.unwrap();
        reader.next_batch().await.unwrap().unwrap().data
    }

    #[tokio::test]
    async fn columns_come_in_schema_order_from_the_connector_or_the_wrapper() {
        let columns = ["c".to_owned(), "a".to_owned()];
        for projects in [true, false] {
            let source = with_columns(abc(projects), &columns, "sources[0]").unwrap();
            assert_eq!(names(source.as_ref()), ["a", "c"]);
            assert_eq!(source.describe().contains("columns: a, c"), !projects);
            let batch = first_batch(source.as_ref()).await;
            assert_eq!(batch.schema(), source.schema());
            // The connector's own projection reads columns 0 and 1 of its narrow schema; the
            // wrapper keeps columns 0 and 2 of the full batch.
            let c = batch
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            assert_eq!(c.value(0), if projects { 1 } else { 2 });
        }
    }

    #[test]
    fn all_columns_leave_the_source_alone_and_unknown_ones_are_named() {
        let all = ["b", "a", "c"].map(str::to_owned);
        let source = abc(false);
        let same = with_columns(Arc::clone(&source), &all, "sources[0]").unwrap();
        assert!(Arc::ptr_eq(&same, &source));
        let (path, err) = with_columns(source, &["a".to_owned(), "x".to_owned()], "sources[2]")
            .err()
            .unwrap();
        assert_eq!(path, "sources[2].columns[1]");
        assert!(err.to_string().contains("`x` is not a column"), "{err}");
        assert!(err.to_string().contains("a, b, c"), "{err}");
    }
}
