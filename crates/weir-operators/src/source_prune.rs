//! A source's `prune`: conditions the connector may skip input by (predicate pushdown,
//! [`PreparedSource::prune`]). A connector that cannot prune reads everything; either way the
//! job's filters run after the source.

use std::sync::Arc;
use weir_api::{Error, PreparedSource, PruneCondition, SourcePredicate};

/// `source` told about `conditions` (written at `origin`, e.g. `sources[0]`): the connector's
/// pruned copy where it prunes, otherwise `source` as it is. Call it before
/// [`crate::with_columns`]: the conditions name columns of the connector's whole schema.
///
/// # Errors
/// A config error at `<origin>.prune[j].column` for a column the source does not have or
/// cannot compare, at `<origin>.prune[j].value` for a value not of the column's type; an error
/// naming the connector when its pruned copy has another schema.
pub fn with_prune(
    source: Arc<dyn PreparedSource>,
    conditions: &[PruneCondition],
    origin: &str,
) -> std::result::Result<Arc<dyn PreparedSource>, (String, Error)> {
    let schema = source.schema();
    let predicate = SourcePredicate::resolve(conditions, &schema).map_err(|(field, message)| {
        let path = format!("{origin}.prune{field}");
        (path.clone(), Error::config(path, message))
    })?;
    match source.prune(&predicate) {
        Some(pruned) if pruned.schema() == schema => Ok(pruned),
        Some(pruned) => {
            let path = format!("{origin}.prune");
            let message = format!(
                "the connector `{}` pruned by {predicate} reads {}, not {schema}",
                source.describe(),
                pruned.schema()
            );
            Err((path.clone(), Error::config(path, message)))
        }
        None => Ok(source),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
    use weir_api::{Boundedness, Result, SourceCapability, SourceSplit, SplitReader, TaskContext};

    /// A source with no splits that remembers the predicate it was pruned by.
    #[derive(Debug)]
    struct Empty {
        prunes: bool,
        pruned_by: Option<String>,
    }

    #[async_trait::async_trait]
    impl PreparedSource for Empty {
        fn schema(&self) -> SchemaRef {
            Arc::new(Schema::new(vec![
                Field::new("a", DataType::Int64, false),
                Field::new("b", DataType::Utf8, true),
            ]))
        }
        fn capabilities(&self) -> Vec<SourceCapability> {
            Vec::new()
        }
        fn boundedness(&self) -> Boundedness {
            Boundedness::Bounded
        }
        fn describe(&self) -> String {
            match &self.pruned_by {
                Some(p) => format!("empty; prunes by {p}"),
                None => "empty".into(),
            }
        }
        async fn enumerate_splits(&self) -> Result<Vec<SourceSplit>> {
            Ok(Vec::new())
        }
        async fn open_split(
            &self,
            _: &SourceSplit,
            _: &TaskContext,
        ) -> Result<Box<dyn SplitReader>> {
            Err(Error::Internal("no splits".into()))
        }
        fn prune(&self, predicate: &SourcePredicate) -> Option<Arc<dyn PreparedSource>> {
            self.prunes.then(|| {
                Arc::new(Empty {
                    prunes: true,
                    pruned_by: Some(predicate.to_string()),
                }) as Arc<dyn PreparedSource>
            })
        }
    }

    fn conditions(value: serde_json::Value) -> Vec<PruneCondition> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_connector_prunes_or_is_left_alone_and_bad_conditions_are_named() {
        let c = conditions(serde_json::json!([
            { "column": "a", "op": ">=", "value": 3 },
            { "column": "b", "op": "is_not_null" },
        ]));
        let pruning: Arc<dyn PreparedSource> = Arc::new(Empty {
            prunes: true,
            pruned_by: None,
        });
        let pruned = with_prune(pruning, &c, "sources[0]").unwrap();
        assert_eq!(
            pruned.describe(),
            "empty; prunes by a >= 3 AND b IS NOT NULL"
        );
        let ignoring: Arc<dyn PreparedSource> = Arc::new(Empty {
            prunes: false,
            pruned_by: None,
        });
        let same = with_prune(Arc::clone(&ignoring), &c, "sources[0]").unwrap();
        assert!(Arc::ptr_eq(&same, &ignoring));
        let bad = conditions(serde_json::json!([{ "column": "b", "op": "=", "value": 1 }]));
        let (path, err) = with_prune(ignoring, &bad, "sources[1]").err().unwrap();
        assert_eq!(path, "sources[1].prune[0].value");
        assert!(err.to_string().contains("takes a string"), "{err}");
    }
}
