//! The built-in `union` operator: merges inputs of the same columns into one stream.

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use std::sync::Arc;
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, TaskContext,
};

/// Factory of `union`: every input must have the same column names and types; a column is
/// nullable in the output when it is nullable in any input.
#[derive(Debug, Default, Clone, Copy)]
pub struct UnionFactory;

impl OperatorFactory for UnionFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let Some(first) = spec.input_schemas.first() else {
            return Err(Error::config(
                spec.options_path,
                "union needs at least one input",
            ));
        };
        if !spec.options.is_null() && spec.options.as_object().is_none_or(|o| !o.is_empty()) {
            return Err(Error::config(spec.options_path, "union takes no options"));
        }
        let mut fields: Vec<Field> = first.fields().iter().map(|f| f.as_ref().clone()).collect();
        for (k, schema) in spec.input_schemas.iter().enumerate().skip(1) {
            let same = schema.fields().len() == fields.len()
                && schema
                    .fields()
                    .iter()
                    .zip(&fields)
                    .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
            if !same {
                return Err(Error::schema(
                    format!("union `{}` input {k}", spec.operator_id),
                    format!(
                        "columns {} differ from input 0's {}",
                        describe(schema),
                        describe(first)
                    ),
                ));
            }
            for (f, other) in fields.iter_mut().zip(schema.fields()) {
                if other.is_nullable() {
                    *f = f.clone().with_nullable(true);
                }
            }
        }
        Ok(Arc::new(PreparedUnion {
            schema: Arc::new(Schema::new(fields)),
        }))
    }
}

fn describe(schema: &SchemaRef) -> String {
    let cols: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect();
    format!("({})", cols.join(", "))
}

#[derive(Debug)]
struct PreparedUnion {
    schema: SchemaRef,
}

impl PreparedOperator for PreparedUnion {
    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn describe(&self) -> String {
        "union".into()
    }

    fn accepts_changes(&self) -> bool {
        true
    }

    fn reads_event_time(&self) -> bool {
        false
    }

    fn create(&self, _ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(UnionOperator {
            schema: self.schema.clone(),
        }))
    }
}

struct UnionOperator {
    schema: SchemaRef,
}

impl Operator for UnionOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        if batch.schema().fields() == self.schema.fields() {
            out.emit(batch);
        } else {
            // Only nullability differs (checked at prepare): relabel, no copy.
            let relabeled = RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())
                .map_err(|e| Error::arrow("relabeling a union input", e))?;
            out.emit(relabeled);
        }
        Ok(())
    }
}
