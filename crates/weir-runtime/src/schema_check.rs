//! The check that an operator emits batches of the schema it declared for a port.
//!
//! A batch of another schema would reach the next operator or a sink that planned against the
//! declared one and fail there, far from its cause, or be written wrong. Batches of one
//! operator nearly always share one `SchemaRef`, so the fields are compared once per operator
//! and schema, and every later batch costs one pointer comparison.

use arrow::datatypes::SchemaRef;

/// The declared schema of one output port and the last emitted schema found equal to it.
pub(crate) struct SchemaCheck {
    declared: SchemaRef,
    accepted: Option<SchemaRef>,
}

impl SchemaCheck {
    /// A check against `declared`.
    pub(crate) fn new(declared: SchemaRef) -> Self {
        SchemaCheck {
            declared,
            accepted: None,
        }
    }

    /// Whether a batch of `schema` may leave the port: its fields equal the declared ones.
    pub(crate) fn accepts(&mut self, schema: &SchemaRef) -> bool {
        if self
            .accepted
            .as_ref()
            .is_some_and(|a| std::sync::Arc::ptr_eq(a, schema))
        {
            return true;
        }
        if schema.fields() == self.declared.fields() {
            self.accepted = Some(schema.clone());
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn schema(name: &str) -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new(name, DataType::Int64, false)]))
    }

    #[test]
    fn accepts_equal_fields_under_any_pointer_and_refuses_others_every_time() {
        let mut check = SchemaCheck::new(schema("a"));
        assert!(check.accepts(&schema("a")));
        let same = schema("a");
        assert!(check.accepts(&same));
        assert!(check.accepts(&same));
        let other = schema("b");
        assert!(!check.accepts(&other));
        assert!(!check.accepts(&other), "a refused schema is never cached");
        assert!(check.accepts(&same));
    }
}
