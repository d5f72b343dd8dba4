//! The Rust builder of job specs: the same [`JobSpec`] a YAML file gives, built in code.

use crate::spec::{
    ComputedColumn, InputSpec, JobSpec, OperatorSpec, SinkSpec, SourceSpec, WatermarkSpec,
};
use weir_api::BadRecordPolicy;

impl JobSpec {
    /// Starts a spec in Rust: the builder front end.
    pub fn builder(job: impl Into<String>) -> JobSpecBuilder {
        JobSpecBuilder {
            spec: JobSpec {
                job: Some(job.into()),
                pipeline: None,
                parallelism: None,
                state_shards: None,
                channel_capacity: None,
                semantic_mode: None,
                checkpoint: None,
                restart: None,
                state: None,
                sources: Vec::new(),
                operators: Vec::new(),
                sinks: Vec::new(),
            },
        }
    }
}

/// Builds a [`JobSpec`] in Rust, for tests, embedding and plugin authors.
#[derive(Debug, Clone)]
pub struct JobSpecBuilder {
    spec: JobSpec,
}

impl JobSpecBuilder {
    /// Sets the default parallelism.
    pub fn parallelism(mut self, parallelism: u32) -> Self {
        self.spec.parallelism = Some(parallelism);
        self
    }

    /// Sets the number of state shards.
    pub fn state_shards(mut self, shards: u32) -> Self {
        self.spec.state_shards = Some(shards);
        self
    }

    /// Sets the channel capacity in messages.
    pub fn channel_capacity(mut self, capacity: u32) -> Self {
        self.spec.channel_capacity = Some(capacity);
        self
    }

    /// Adds a source.
    pub fn source(mut self, source: SourceSpec) -> Self {
        self.spec.sources.push(source);
        self
    }

    /// Adds an operator.
    pub fn operator(mut self, operator: OperatorSpec) -> Self {
        self.spec.operators.push(operator);
        self
    }

    /// Adds a sink.
    pub fn sink(mut self, sink: SinkSpec) -> Self {
        self.spec.sinks.push(sink);
        self
    }

    /// The finished spec.
    pub fn build(self) -> JobSpec {
        self.spec
    }
}

impl SourceSpec {
    /// A named source of connector type `connector` with `options`.
    pub fn new(name: &str, connector: &str, options: serde_json::Value) -> Self {
        SourceSpec {
            name: Some(name.to_owned()),
            uid: None,
            connector: connector.to_owned(),
            parallelism: None,
            schema: None,
            bad_records: BadRecordPolicy::Fail,
            watermark: None,
            computed: Vec::new(),
            columns: None,
            prune: None,
            options,
        }
    }

    /// The source with event-time watermarks as `watermark` says.
    pub fn with_watermark(mut self, watermark: WatermarkSpec) -> Self {
        self.watermark = Some(watermark);
        self
    }

    /// The source with one more computed column, `name` = `expression`, after those it has.
    pub fn with_computed(mut self, name: &str, expression: &str) -> Self {
        self.computed.push(ComputedColumn::new(name, expression));
        self
    }
}

impl OperatorSpec {
    /// An operator of `type_name` reading `input`; `name` may be `None` (structural-hash id).
    pub fn new(
        name: Option<&str>,
        type_name: &str,
        input: &str,
        options: serde_json::Value,
    ) -> Self {
        OperatorSpec {
            name: name.map(str::to_owned),
            uid: None,
            type_name: type_name.to_owned(),
            input: Some(InputSpec::Name(input.to_owned())),
            inputs: Vec::new(),
            partition: None,
            parallelism: None,
            options,
        }
    }
}

impl SinkSpec {
    /// A named sink of connector type `connector` reading `input`.
    pub fn new(name: &str, connector: &str, input: &str, options: serde_json::Value) -> Self {
        SinkSpec {
            name: Some(name.to_owned()),
            uid: None,
            connector: connector.to_owned(),
            input: Some(InputSpec::Name(input.to_owned())),
            inputs: Vec::new(),
            partition: None,
            parallelism: None,
            options,
        }
    }
}
