//! Named factories: how job specs find operators and connectors, built-in or plugin.

use crate::builtin::{BlackholeSinkFactory, DatagenSourceFactory};
use crate::operators::{FilterFactory, ProjectFactory};
use crate::union::UnionFactory;
use crate::window::WindowFactory;
use std::collections::BTreeMap;
use std::sync::Arc;
use weir_api::{OperatorFactory, SinkFactory, SourceFactory};

/// Operator and connector factories by name.
///
/// A Rust plugin registers its [`OperatorFactory`] under a name; a job spec then uses that name
/// as an operator `type`. Registering a name twice replaces the earlier factory.
#[derive(Clone, Default)]
pub struct Registry {
    operators: BTreeMap<String, Arc<dyn OperatorFactory>>,
    sources: BTreeMap<String, Arc<dyn SourceFactory>>,
    sinks: BTreeMap<String, Arc<dyn SinkFactory>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("operators", &self.operators.keys().collect::<Vec<_>>())
            .field("sources", &self.sources.keys().collect::<Vec<_>>())
            .field("sinks", &self.sinks.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-ins: operators `filter`, `project`, `union`; source `datagen`; sink `blackhole`.
    pub fn with_builtins() -> Self {
        let mut r = Self::empty();
        r.register_operator("filter", Arc::new(FilterFactory::new()));
        r.register_operator("project", Arc::new(ProjectFactory::new()));
        r.register_operator("union", Arc::new(UnionFactory));
        r.register_operator("window", Arc::new(WindowFactory));
        r.register_source("datagen", Arc::new(DatagenSourceFactory));
        r.register_sink("blackhole", Arc::new(BlackholeSinkFactory::new()));
        r
    }

    /// Registers an operator type.
    pub fn register_operator(&mut self, name: &str, factory: Arc<dyn OperatorFactory>) {
        self.operators.insert(name.to_owned(), factory);
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
