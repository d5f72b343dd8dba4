//! SQL expression text -> DataFusion physical expression, planned once per operator.
//!
//! The steps are the ones DataFusion takes for a `SELECT` item, on a schema with no table:
//! parse with the session's dialect ([`SessionState::sql_to_expr_with_alias`]), plan against the
//! input schema ([`SessionState::create_logical_expr_from_sql_expr`], which resolves columns and
//! functions from the session's registry), coerce types and simplify ([`ExprSimplifier`]), then
//! create the physical expression ([`SessionState::create_physical_expr`]).
//!
//! Simplification folds constants once, at prepare time. That includes `now()`, which DataFusion
//! defines as the query start: here that is when the operator was prepared.

use arrow::datatypes::{DataType, Field, FieldRef, SchemaRef};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DataFusionError};
use datafusion::execution::FunctionRegistry;
use datafusion::execution::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr, ScalarUDF};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::parser::DFParserBuilder;
use datafusion::sql::planner::IdentNormalizer;
use datafusion::sql::sqlparser::ast::ExprWithAlias;
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use std::sync::{Arc, PoisonError, RwLock};
use weir_api::Error;

/// A DataFusion session (dialect, config, functions) shared by a registry and the expression
/// operators it creates, so that a scalar function registered later is seen by all of them.
///
/// The session is built on first use, and again after a function was registered, so a registry
/// whose jobs plan no expression never builds one.
#[derive(Clone, Default)]
pub struct SharedSession {
    inner: Arc<RwLock<SessionSlot>>,
}

#[derive(Default, Clone)]
struct SessionSlot {
    /// The session to start from; `None`: DataFusion's default features.
    base: Option<SessionState>,
    /// User scalar functions, in registration order (a later one wins on a name).
    udfs: Vec<Arc<ScalarUDF>>,
    /// `base` with `udfs`, once built.
    built: Option<Arc<SessionState>>,
}

impl SharedSession {
    /// A session starting from `state` instead of DataFusion's defaults.
    pub fn with_base(state: SessionState) -> Self {
        let slot = SessionSlot {
            base: Some(state),
            ..SessionSlot::default()
        };
        Self {
            inner: Arc::new(RwLock::new(slot)),
        }
    }

    /// An independent copy: functions registered on it afterwards are not seen by `self`.
    pub fn deep_clone(&self) -> Self {
        let slot = self
            .inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Self {
            inner: Arc::new(RwLock::new(slot)),
        }
    }

    /// Adds a scalar function; it replaces one of the same name (or alias).
    pub fn register_udf(&self, udf: Arc<ScalarUDF>) {
        let mut slot = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        slot.udfs.push(udf);
        slot.built = None;
    }

    /// The session with every registered function, built if needed.
    pub fn state(&self) -> Arc<SessionState> {
        if let Some(state) = &self
            .inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .built
        {
            return Arc::clone(state);
        }
        let mut slot = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = &slot.built {
            return Arc::clone(state);
        }
        let mut state = match &slot.base {
            Some(base) => base.clone(),
            None => SessionStateBuilder::new().with_default_features().build(),
        };
        // Flink's functions first, so a function registered by the user replaces one.
        for udf in crate::flink_functions().iter().chain(&slot.udfs) {
            // DataFusion's SessionState only inserts into a map here; it never fails.
            if let Err(e) = state.register_udf(Arc::clone(udf)) {
                tracing::warn!(function = udf.name(), error = %e, "registering a function failed");
            }
        }
        let state = Arc::new(state);
        slot.built = Some(Arc::clone(&state));
        state
    }
}

/// Plans SQL expressions with one DataFusion session (its dialect, config and functions).
///
/// The session is built on first use, so registering the built-in factories costs nothing for
/// jobs that do not use them.
#[derive(Default)]
pub struct ExprCompiler {
    session: SharedSession,
}

impl std::fmt::Debug for ExprCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExprCompiler").finish_non_exhaustive()
    }
}

/// One planned expression.
#[derive(Debug, Clone)]
pub(crate) struct CompiledExpr {
    /// The evaluator, shared by every subtask.
    pub(crate) physical: Arc<dyn PhysicalExpr>,
    /// Output field: named after the alias, the column, or DataFusion's display name; its type
    /// and nullability are the physical expression's.
    pub(crate) field: FieldRef,
    /// Whether the text had an `AS alias`.
    pub(crate) has_alias: bool,
}

impl ExprCompiler {
    /// A compiler over `state`, for callers that registered their own functions or config.
    pub(crate) fn with_state(state: SessionState) -> Self {
        Self {
            session: SharedSession::with_base(state),
        }
    }

    /// A compiler over a session shared with a registry: it sees the functions registered there,
    /// also those registered after it was created.
    pub fn shared(session: SharedSession) -> Self {
        Self { session }
    }

    /// Plans `text` (an expression with an optional `AS alias`) against `input`.
    pub(crate) fn compile(
        &self,
        text: &str,
        input: &SchemaRef,
    ) -> Result<CompiledExpr, DataFusionError> {
        let state = self.session.state();
        let options = state.config_options();
        let df_schema = Arc::new(DFSchema::try_from(Arc::clone(input))?);

        // Deep chains would overflow the stack of whatever recursed over the parsed tree, and
        // simplification below folds constants: refused on the tokens, before either.
        weir_plan::sql_guard::check_text(text, weir_plan::sql_depth::MAX_SPEC_EXPRESSION_DEPTH)
            .map_err(|e| {
                DataFusionError::Plan(format!(
                    "line {}, column {}: {}",
                    e.line, e.column, e.message
                ))
            })?;
        let dialect = dialect_from_str(options.sql_parser.dialect).ok_or_else(|| {
            DataFusionError::Plan(format!(
                "unsupported SQL dialect {}",
                options.sql_parser.dialect
            ))
        })?;
        let parsed = DFParserBuilder::new(text)
            .with_dialect(dialect.as_ref())
            .with_recursion_limit(weir_plan::sql_depth::MAX_SPEC_EXPRESSION_DEPTH + 64)
            .build()?
            .parse_into_expr()?;
        // Aliases are normalized like identifiers in a SELECT list (`AS Euro` -> `euro`,
        // `AS "Euro"` -> `Euro`), which the SQL planner does not do for a lone expression.
        let alias = parsed.alias.map(|ident| {
            IdentNormalizer::new(options.sql_parser.enable_ident_normalization).normalize(ident)
        });
        let logical = state.create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: parsed.expr,
                alias: None,
            },
            &df_schema,
        )?;
        reject_stateful_calls(&logical)?;
        // Named before coercion and simplification, as DataFusion names SELECT items.
        let has_alias = alias.is_some();
        let name = match alias {
            Some(alias) => alias,
            None => logical.schema_name().to_string(),
        };

        let simplifier = ExprSimplifier::new(
            SimplifyContext::builder()
                .with_schema(Arc::clone(&df_schema))
                .with_config_options(Arc::clone(options))
                .with_current_time()
                .build(),
        );
        let logical = simplifier.coerce(logical, &df_schema)?;
        let logical = simplifier.simplify(logical)?;
        let physical = state.create_physical_expr(logical, &df_schema)?;
        let field = physical.return_field(input)?;
        let field = Arc::new(Field::clone(&field).with_name(name));
        Ok(CompiledExpr {
            physical,
            field,
            has_alias,
        })
    }
}

impl ExprCompiler {
    /// Plans `text`, a boolean condition without an alias, against `input`; errors name the
    /// option at `path`.
    ///
    /// # Errors
    /// [`Error::Expression`] at `path` for text DataFusion cannot plan, an `AS` alias, or a
    /// type other than boolean.
    pub(crate) fn predicate(
        &self,
        text: &str,
        input: &SchemaRef,
        path: &str,
    ) -> Result<Arc<dyn PhysicalExpr>, Error> {
        let compiled = self
            .compile(text, input)
            .map_err(|e| expression_error(path, text, datafusion_message(&e)))?;
        if compiled.has_alias {
            return Err(expression_error(
                path,
                text,
                "a predicate has no output column; remove the `AS` alias",
            ));
        }
        let data_type = compiled.field.data_type();
        if data_type != &DataType::Boolean {
            return Err(expression_error(
                path,
                text,
                format!("the predicate must be boolean, but it has type {data_type}"),
            ));
        }
        Ok(compiled.physical)
    }
}

/// Aggregate and window calls need state across rows; DataFusion's own message for them is a
/// debug dump of the plan node, so name the call and say what to use instead.
fn reject_stateful_calls(expr: &Expr) -> Result<(), DataFusionError> {
    let mut found = None;
    expr.apply(|e| {
        let kind = match e {
            Expr::AggregateFunction(_) => "an aggregate function",
            Expr::WindowFunction(_) => "a window function",
            _ => return Ok(TreeNodeRecursion::Continue),
        };
        found = Some(format!("`{}` is {kind}", e.schema_name()));
        Ok(TreeNodeRecursion::Stop)
    })?;
    match found {
        Some(what) => Err(DataFusionError::Plan(format!(
            "{what}, but this expression is evaluated row by row; aggregate in a window or \
             aggregate operator instead"
        ))),
        None => Ok(()),
    }
}

/// An [`Error::Expression`] for the option at `path` holding `text`.
pub(crate) fn expression_error(path: &str, text: &str, message: impl Into<String>) -> Error {
    Error::Expression {
        path: path.to_owned(),
        expression: weir_api::excerpt(text).into_owned(),
        message: message.into(),
    }
}

/// DataFusion's message without a backtrace, for error payloads.
pub(crate) fn datafusion_message(err: &DataFusionError) -> String {
    err.strip_backtrace()
}

/// The index of column `name` of `input`; else a config error at `path` that lists the input's
/// columns.
pub(crate) fn column_index(
    input: &arrow::datatypes::Schema,
    name: &str,
    path: &str,
) -> Result<usize, Error> {
    input.index_of(name).map_err(|_| {
        let names: Vec<&str> = input.fields().iter().map(|f| f.name().as_str()).collect();
        Error::config(
            path,
            format!(
                "no column `{name}` in the input; columns: {}",
                names.join(", ")
            ),
        )
    })
}

/// The one input schema of a single-input operator.
pub(crate) fn single_input(
    kind: &str,
    operator: &weir_api::OperatorId,
    inputs: &[SchemaRef],
) -> Result<SchemaRef, Error> {
    match inputs {
        [one] => Ok(Arc::clone(one)),
        _ => Err(Error::schema(
            format!("{kind} operator `{operator}`"),
            format!("{kind} takes exactly one input, got {}", inputs.len()),
        )),
    }
}

/// Where `condition` is true over `pairs` (false and NULL do not match).
pub(crate) fn holds(
    condition: &dyn PhysicalExpr,
    pairs: &arrow::record_batch::RecordBatch,
) -> weir_api::Result<Vec<bool>> {
    let value = condition
        .evaluate(pairs)
        .and_then(|v| v.into_array(pairs.num_rows()))
        .map_err(|e| weir_api::Error::Internal(format!("evaluating the join condition: {e}")))?;
    use arrow::array::{Array, AsArray};
    let mask = value.as_boolean_opt().ok_or_else(|| {
        weir_api::Error::Internal(format!(
            "the join condition returned {} instead of Boolean",
            value.data_type()
        ))
    })?;
    Ok((0..mask.len())
        .map(|i| mask.is_valid(i) && mask.value(i))
        .collect())
}
