//! The runtime holds plugin operators to their declared output schemas, on every port and in
//! every build: a batch of another schema fails the job naming the operator and the port,
//! before anything downstream sees it.

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;
use weir::api::{
    Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, SideOutput,
    TaskContext,
};
use weir::{Engine, JobSpec};

/// Which port the plugin gets wrong.
#[derive(Debug, Clone, Copy)]
enum Wrong {
    Nothing,
    Main,
    Side,
}

/// Plugin: declares `x: Int64` on its main output and side output `copy`, and emits every
/// batch on both; the port named by `Wrong` gets a batch whose column is called `y` instead.
struct Emitter(Wrong);

#[derive(Debug)]
struct PreparedEmitter {
    declared: SchemaRef,
    wrong: Wrong,
}

struct EmitterInstance {
    declared: SchemaRef,
    renamed: SchemaRef,
    wrong: Wrong,
}

impl OperatorFactory for Emitter {
    fn prepare(&self, _spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        Ok(Arc::new(PreparedEmitter {
            declared: Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)])),
            wrong: self.0,
        }))
    }
}

impl PreparedOperator for PreparedEmitter {
    fn output_schema(&self) -> SchemaRef {
        self.declared.clone()
    }

    fn side_outputs(&self) -> Vec<SideOutput> {
        vec![SideOutput {
            name: "copy".into(),
            schema: self.declared.clone(),
        }]
    }

    fn describe(&self) -> String {
        "emitter".into()
    }

    fn create(&self, _ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(EmitterInstance {
            declared: self.declared.clone(),
            renamed: Arc::new(Schema::new(vec![Field::new("y", DataType::Int64, false)])),
            wrong: self.wrong,
        }))
    }
}

impl Operator for EmitterInstance {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        let column: ArrayRef = Arc::new(Int64Array::from_iter_values(0..batch.num_rows() as i64));
        let make = |schema: &SchemaRef| {
            RecordBatch::try_new(schema.clone(), vec![column.clone()]).expect("valid batch")
        };
        let (main, side) = match self.wrong {
            Wrong::Nothing => (&self.declared, &self.declared),
            Wrong::Main => (&self.renamed, &self.declared),
            Wrong::Side => (&self.declared, &self.renamed),
        };
        out.emit(make(main));
        out.emit_side(0, make(side));
        Ok(())
    }
}

async fn run(wrong: Wrong) -> weir::Result<weir::RunSummary> {
    let spec = JobSpec::from_yaml_str(
        r#"
job: contract
parallelism: 2
sources:
  - name: gen
    connector: datagen
    schema: [{ name: v, type: int64 }]
    options: { rows: 1000 }
operators:
  - { name: emit, type: emitter, input: gen }
sinks:
  - { name: main, connector: blackhole, input: emit }
  - { name: copies, connector: blackhole, input: emit.copy }
"#,
        "contract.yaml",
    )
    .expect("spec");
    let mut engine = Engine::new();
    engine.register_operator("emitter", Arc::new(Emitter(wrong)));
    engine.run(&spec, Some("contract.yaml")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_of_an_undeclared_schema_fail_the_job_naming_operator_and_port() {
    let summary = run(Wrong::Nothing).await.expect("declared schemas pass");
    assert_eq!(summary.metrics.sink_rows(), 2000);

    let err = run(Wrong::Main)
        .await
        .expect_err("a wrong main output fails");
    let message = err.to_string();
    assert!(
        message.contains("emit[") && message.contains("its main output") && message.contains("y"),
        "{message}"
    );

    let err = run(Wrong::Side)
        .await
        .expect_err("a wrong side output fails");
    assert!(err.to_string().contains("its side output 0"), "{err}");
}
