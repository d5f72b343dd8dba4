//! Named factories: how job specs find operators and connectors, built-in or plugin.

use datafusion::execution::SessionState;
use datafusion::logical_expr::ScalarUDF;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{OperatorFactory, SinkFactory, SourceFactory};
use weir_operators::window::WindowFactory;
use weir_operators::{ExprCompiler, FilterFactory, ProjectFactory, SharedSession, UnionFactory};

/// Creates a built-in operator factory that plans with the registry's session.
type BoundFactory = fn(SharedSession) -> Arc<dyn OperatorFactory>;

/// Operator and connector factories by name, and the scalar functions SQL expressions may call.
///
/// A Rust plugin registers its [`OperatorFactory`] under a name; a job spec then uses that name
/// as an operator `type`. Registering a name twice replaces the earlier factory.
///
/// The registry owns one DataFusion session: DataFusion's default functions plus those given to
/// [`Registry::register_udf`]. The built-in `filter` and `project` and sources' computed columns
/// plan with it, whenever the function was registered. A clone of the registry starts with a
/// copy of it: functions registered on one afterwards are not seen by the other.
#[derive(Default)]
pub struct Registry {
    operators: BTreeMap<String, Arc<dyn OperatorFactory>>,
    sources: BTreeMap<String, Arc<dyn SourceFactory>>,
    sinks: BTreeMap<String, Arc<dyn SinkFactory>>,
    session: SharedSession,
    /// Operators registered by [`Registry::with_builtin_operators`] that plan with `session` and have not
    /// been replaced since: a clone rebuilds them on its own copy of the session.
    bound: BTreeMap<String, BoundFactory>,
}

impl Clone for Registry {
    fn clone(&self) -> Self {
        let session = self.session.deep_clone();
        let mut operators = self.operators.clone();
        for (name, make) in &self.bound {
            operators.insert(name.clone(), make(session.clone()));
        }
        Registry {
            operators,
            sources: self.sources.clone(),
            sinks: self.sinks.clone(),
            session,
            bound: self.bound.clone(),
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("operators", &self.operators.keys().collect::<Vec<_>>())
            .field("sources", &self.sources.keys().collect::<Vec<_>>())
            .field("sinks", &self.sinks.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every built-in operator (`filter`, `project`, `union`, the windows, joins, OVER,
    /// deduplication, Top-N, `group_aggregate`, `upsert_normalize`: docs/job-spec.md lists
    /// them). Connectors, built-in
    /// (`datagen`, `blackhole`, `file`) or not, live in their own crates and are registered by
    /// whoever assembles the registry (the `weir` facade's `default_registry`).
    pub fn with_builtin_operators() -> Self {
        let mut r = Self::empty();
        r.register_bound("filter", |s| Arc::new(FilterFactory::shared(s)));
        r.register_bound("project", |s| Arc::new(ProjectFactory::shared(s)));
        r.register_operator("union", Arc::new(UnionFactory));
        r.register_operator("window", Arc::new(WindowFactory));
        r.register_operator("dedup_first", Arc::new(weir_operators::dedup::DedupFactory));
        r.register_operator("top_n", Arc::new(weir_operators::top_n::CurrentTopNFactory));
        r.register_operator(
            "temporal_join",
            Arc::new(weir_operators::temporal_join::TemporalJoinFactory),
        );
        r.register_operator(
            "upsert_normalize",
            Arc::new(weir_operators::upsert_normalize::UpsertNormalizeFactory),
        );
        r.register_operator(
            "group_aggregate",
            Arc::new(weir_operators::group_aggregate::GroupAggregateFactory),
        );
        r.register_operator(
            "over_aggregate",
            Arc::new(weir_operators::over::OverFactory),
        );
        r.register_operator(
            "window_tvf",
            Arc::new(weir_operators::window_tvf::WindowTvfFactory),
        );
        r.register_operator(
            "window_top_n",
            Arc::new(weir_operators::window_top_n::WindowTopNFactory),
        );
        r.register_bound("regular_join", |s| {
            Arc::new(weir_operators::regular_join::RegularJoinFactory::shared(s))
        });
        r.register_bound("interval_join", |s| {
            Arc::new(weir_operators::interval_join::IntervalJoinFactory::shared(
                s,
            ))
        });
        r.register_operator(
            "table_join",
            Arc::new(weir_operators::table_join::TableJoinFactory),
        );
        r
    }

    fn register_bound(&mut self, name: &str, make: BoundFactory) {
        self.operators
            .insert(name.to_owned(), make(self.session.clone()));
        self.bound.insert(name.to_owned(), make);
    }

    /// Registers an operator type.
    pub fn register_operator(&mut self, name: &str, factory: Arc<dyn OperatorFactory>) {
        self.bound.remove(name);
        self.operators.insert(name.to_owned(), factory);
    }

    /// Registers a scalar function that SQL expressions can call: `filter` predicates,
    /// `project` expressions and sources' computed columns, whether those factories were
    /// registered before or after it. It replaces a function of the same name (or alias),
    /// built-in ones included.
    ///
    /// SQL lower-cases unquoted identifiers, so give the function a lower-case name (or quote
    /// it in expressions: `"myFn"(x)`).
    pub fn register_udf(&mut self, udf: ScalarUDF) {
        self.session.register_udf(Arc::new(udf));
    }

    /// A copy of the registry's DataFusion session: default features plus every registered
    /// scalar function. A SQL planner uses it to see the same functions as the operators.
    pub fn session_state(&self) -> SessionState {
        SessionState::clone(&self.session.state())
    }

    /// A compiler planning with the registry's session.
    pub(crate) fn expr_compiler(&self) -> ExprCompiler {
        ExprCompiler::shared(self.session.clone())
    }

    /// Registers a source connector type.
    pub fn register_source(&mut self, name: &str, factory: Arc<dyn SourceFactory>) {
        self.sources.insert(name.to_owned(), factory);
    }

    /// Registers a sink connector type.
    pub fn register_sink(&mut self, name: &str, factory: Arc<dyn SinkFactory>) {
        self.sinks.insert(name.to_owned(), factory);
    }

    /// The operator factory named `name`.
    pub fn operator(&self, name: &str) -> Option<&Arc<dyn OperatorFactory>> {
        self.operators.get(name)
    }

    /// The source factory named `name`.
    pub fn source(&self, name: &str) -> Option<&Arc<dyn SourceFactory>> {
        self.sources.get(name)
    }

    /// The sink factory named `name`.
    pub fn sink(&self, name: &str) -> Option<&Arc<dyn SinkFactory>> {
        self.sinks.get(name)
    }

    /// Registered operator names, sorted.
    pub fn operator_names(&self) -> Vec<String> {
        self.operators.keys().cloned().collect()
    }

    /// Registered source names, sorted.
    pub fn source_names(&self) -> Vec<String> {
        self.sources.keys().cloned().collect()
    }

    /// Registered sink names, sorted.
    pub fn sink_names(&self) -> Vec<String> {
        self.sinks.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
    use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
    use weir_api::{OperatorArgs, OperatorId};

    fn udf(name: &str) -> ScalarUDF {
        create_udf(
            name,
            vec![DataType::Int64],
            DataType::Boolean,
            Volatility::Immutable,
            Arc::new(|_: &[ColumnarValue]| Ok(ColumnarValue::Scalar(true.into()))),
        )
    }

    /// Whether the registry's `filter` accepts `predicate` over an Int64 column `x`.
    fn filter_plans(registry: &Registry, predicate: &str) -> bool {
        let schemas: Vec<SchemaRef> = vec![Arc::new(Schema::new(vec![Field::new(
            "x",
            DataType::Int64,
            true,
        )]))];
        let options = serde_json::json!({ "predicate": predicate });
        registry.operator("filter").is_some_and(|f| {
            f.prepare(&OperatorArgs {
                operator_id: &OperatorId::new("f"),
                options: &options,
                options_path: "operators[0].options",
                input_schemas: &schemas,
            })
            .is_ok()
        })
    }

    #[test]
    fn functions_reach_the_built_ins_registered_before_them_and_clones_are_independent() {
        let mut registry = Registry::with_builtin_operators();
        assert!(filter_plans(&registry, "x > 1"));
        assert!(!filter_plans(&registry, "odd(x)"));
        let before = registry.clone();
        registry.register_udf(udf("odd"));
        assert!(filter_plans(&registry, "odd(x)"));
        assert!(
            registry
                .session_state()
                .scalar_functions()
                .contains_key("odd")
        );
        assert!(!filter_plans(&before, "odd(x)"));

        let mut copy = registry.clone();
        copy.register_udf(udf("even"));
        assert!(filter_plans(&copy, "odd(x) AND even(x)"));
        assert!(!filter_plans(&registry, "even(x)"));
        assert!(
            !registry
                .session_state()
                .scalar_functions()
                .contains_key("even")
        );
    }

    #[test]
    fn a_replaced_built_in_is_left_alone() {
        let mut registry = Registry::with_builtin_operators();
        registry.register_operator("filter", Arc::new(FilterFactory::new()));
        registry.register_udf(udf("odd"));
        // The user's own factory plans with its own session, also in clones.
        assert!(!filter_plans(&registry, "odd(x)"));
        assert!(!filter_plans(&registry.clone(), "odd(x)"));
        assert!(
            registry
                .session_state()
                .scalar_functions()
                .contains_key("odd")
        );
    }
}
