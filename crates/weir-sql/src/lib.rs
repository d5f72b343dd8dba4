//! Weir's SQL front end: a script of Flink-style statements compiled into a job spec.
//!
//! ```sql
//! CREATE TABLE bids (auction BIGINT, price DOUBLE, date_time BIGINT,
//!   ts AS TO_TIMESTAMP_MILLIS(date_time),
//!   WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
//! ) WITH ('connector' = 'filesystem', 'path' = 'bids/*.csv', 'format' = 'csv');
//! CREATE TABLE per_auction (auction BIGINT, window_start TIMESTAMP(3),
//!   window_end TIMESTAMP(3), bids BIGINT, total DOUBLE)
//!   WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'parquet');
//! INSERT INTO per_auction
//! SELECT auction, window_start, window_end, COUNT(*), SUM(price)
//! FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
//! GROUP BY auction, window_start, window_end;
//! ```
//!
//! Statements are parsed with sqlparser, `INSERT`s are planned and optimized by DataFusion,
//! and the optimized plans are translated into the operators of one [`JobSpec`]: the same
//! canonical model a YAML job spec gives (one model, many front ends).

mod connectors;
mod ddl;
mod error;
mod job_builder;
mod planning_errors;
use planning_errors::planning_error;
mod positions;
mod prune;
mod script;
mod translate;
mod tvf;
mod view;

pub use error::{Position, Result, SqlError};
pub use positions::{SpecPositions, SqlOrigin};
pub use script::script_text;

use crate::job_builder::{JobBuilder, Settings, Table};
use crate::script::Statement;
use crate::tvf::{KINDS, Schemas, StreamTable, TvfInput, WindowTvf, function_name};
use arrow::datatypes::{Field, Schema};
use datafusion::catalog::{
    CatalogProvider, CatalogProviderList, MemoryCatalogProvider, MemoryCatalogProviderList,
    MemorySchemaProvider,
};
use datafusion::common::TableReference;
use datafusion::execution::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use std::sync::{Arc, RwLock};
use weir_plan::JobSpec;

/// A compiled script: the job, and whether the script asked to `EXPLAIN` it instead of running.
#[derive(Debug, Clone)]
pub struct SqlJob {
    /// The job spec the script describes.
    pub spec: JobSpec,
    /// The script had an `EXPLAIN INSERT ...`: print the plans, do not run.
    pub explain: bool,
    /// Where in the script each source and sink of the spec, and each of their options, was
    /// written: errors of the deep build are reported there.
    pub positions: SpecPositions,
}

/// Compiles SQL scripts; holds the DataFusion session whose functions (including user scalar
/// functions) statements may call.
#[derive(Clone)]
pub struct SqlCompiler {
    state: SessionState,
}

impl std::fmt::Debug for SqlCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlCompiler").finish_non_exhaustive()
    }
}

impl Default for SqlCompiler {
    fn default() -> Self {
        Self::new()
    }
}

impl SqlCompiler {
    /// A compiler with DataFusion's built-in functions.
    pub fn new() -> Self {
        Self::with_session_state(SessionStateBuilder::new().with_default_features().build())
    }

    /// A compiler planning with `state`'s functions (the runtime's registry provides one with
    /// the registered user functions, so SQL and operators resolve the same names).
    pub fn with_session_state(state: SessionState) -> Self {
        // Rewriting COUNT(DISTINCT x) into a two-level aggregate would hide it from the window
        // translation; every other optimizer rule applies.
        let rules = state
            .optimizers()
            .iter()
            .filter(|r| r.name() != "single_distinct_aggregation_to_group_by")
            .cloned()
            .collect();
        // Spans on columns and functions let a planning error point at the token at fault.
        let mut config = state.config().clone();
        config.options_mut().sql_parser.collect_spans = true;
        let state = SessionStateBuilder::new_from_existing(state)
            .with_config(config)
            .with_optimizer_rules(rules)
            .build();
        Self { state }
    }

    /// The compiler's state with an empty catalog of its own: the tables a script declares are
    /// registered there, so they neither leak into the state's owner (the runtime's registry
    /// shares its catalog with every clone) nor clash with those of a later script.
    fn fresh_state(&self) -> SessionState {
        let options = self.state.config().options();
        let schema = MemoryCatalogProvider::new();
        // A fresh schema provider never refuses a registration.
        let _ = schema.register_schema(
            &options.catalog.default_schema,
            Arc::new(MemorySchemaProvider::new()),
        );
        let catalogs = MemoryCatalogProviderList::new();
        catalogs.register_catalog(options.catalog.default_catalog.clone(), Arc::new(schema));
        SessionStateBuilder::new_from_existing(self.state.clone())
            .with_catalog_list(Arc::new(catalogs))
            .build()
    }

    /// Compiles a script; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// [`SqlError`] with the file, line and column: syntax errors, unknown tables or columns,
    /// bad options, and constructs a streaming job cannot run.
    pub async fn compile(&self, sql: &str, file: &str) -> Result<SqlJob> {
        let statements = script::split(sql, file)?;
        // Before any syntax tree exists: a deep one overflows the stack of whatever recurses
        // over it (DataFusion's planner clones it), which aborts the process; before planning,
        // which folds constants, so a call cannot make it build a huge value.
        for stmt in &statements {
            weir_plan::sql_guard::check_tokens(
                &stmt.tokens,
                weir_plan::sql_depth::MAX_EXPRESSION_DEPTH,
            )
            .map_err(|e| {
                stmt.here
                    .at(Position {
                        line: e.line,
                        column: e.column,
                    })
                    .invalid(e.message)
            })?;
        }
        let ctx = SessionContext::new_with_state(self.fresh_state());
        ctx.register_udf(translate::temporal::AsOfMarker::udf());
        let schemas: Schemas = Arc::new(RwLock::new(Default::default()));
        for kind in KINDS {
            ctx.register_udtf(
                &function_name(kind),
                Arc::new(WindowTvf {
                    kind,
                    schemas: Arc::clone(&schemas),
                }),
            );
        }
        let mut settings = Settings::default();
        let mut job = JobBuilder::default();
        let mut explain = false;
        let mut inserts = 0;
        let mut views: Vec<String> = Vec::new();
        for stmt in &statements {
            match stmt.leading_keyword() {
                Some(Keyword::CREATE) if view::is_create_view(stmt) => {
                    let (name, input) = view::create_view(&ctx, stmt, |name| {
                        job.tables.contains_key(name) || views.iter().any(|v| v == name)
                    })
                    .await?;
                    if let Ok(mut map) = schemas.write() {
                        map.insert(name.clone(), input);
                    }
                    views.push(name);
                }
                Some(Keyword::CREATE) => {
                    let def = ddl::parse_create_table(stmt)?;
                    let table = resolve_table(&ctx, def).await?;
                    let name = table.def.name.clone();
                    if job.tables.contains_key(&name) || views.contains(&name) {
                        return Err(table
                            .def
                            .here
                            .invalid(format!("table `{name}` is declared twice")));
                    }
                    // The window update marker is written by the window operator, not by
                    // the query: DataFusion sees the table without it.
                    let visible = Arc::new(Schema::new(
                        table
                            .schema
                            .fields()
                            .iter()
                            .filter(|f| f.name() != translate::UPDATE_MARKER)
                            .cloned()
                            .collect::<Vec<_>>(),
                    ));
                    // A bare reference keeps the name as declared: a `&str` would be parsed
                    // as SQL and lower-cased, so `"Result"` could not be found again.
                    ctx.register_table(
                        TableReference::bare(name.as_str()),
                        Arc::new(StreamTable { schema: visible }),
                    )
                    .map_err(|e| stmt.here.invalid(e.to_string()))?;
                    if let Ok(mut map) = schemas.write() {
                        map.insert(name.clone(), TvfInput::Table(Arc::clone(&table.schema)));
                    }
                    job.tables.insert(name, table);
                }
                Some(Keyword::SET) => {
                    let (key, value, at) = ddl::parse_set(stmt)?;
                    settings.set(&key, &value, &stmt.here.at(at))?;
                }
                Some(Keyword::INSERT) | Some(Keyword::EXPLAIN) => {
                    let is_explain = stmt.leading_keyword() == Some(Keyword::EXPLAIN);
                    explain |= is_explain;
                    inserts += 1;
                    let (plan, temporal) = plan_insert(&ctx, stmt, is_explain).await?;
                    let mut translator = translate::Translator {
                        job: &mut job,
                        settings: &settings,
                        stmt,
                        prefix: String::new(),
                        counters: Default::default(),
                        named: Default::default(),
                        row_number: None,
                        numbered: Vec::new(),
                        versioned_views: Vec::new(),
                        temporal,
                    };
                    translator.insert(&plan)?;
                }
                Some(Keyword::SELECT) | Some(Keyword::WITH) => {
                    return Err(stmt.here.invalid(
                        "a query needs a destination in a streaming job: write INSERT INTO \
                         <table> SELECT ...",
                    ));
                }
                _ => {
                    let first = stmt
                        .significant()
                        .next()
                        .map(|t| t.token.to_string())
                        .unwrap_or_default();
                    return Err(stmt.here.unsupported(
                        format!("the statement `{first} ...`"),
                        "scripts hold CREATE TABLE, CREATE VIEW, SET, INSERT INTO and EXPLAIN \
                         statements",
                    ));
                }
            }
        }
        let end = script::Statement {
            tokens: Vec::new(),
            here: error::Here {
                file: file.to_owned(),
                position: Position { line: 1, column: 1 },
            },
        };
        if inserts == 0 {
            return Err(end
                .here
                .invalid("the script has no INSERT INTO: nothing would run"));
        }
        settings.check(&end.here)?;
        Ok(SqlJob {
            spec: job.build(&settings, file)?,
            explain,
            positions: job.positions().clone(),
        })
    }
}

/// Completes a table: the types of its computed columns, planned by DataFusion over the
/// physical columns.
async fn resolve_table(ctx: &SessionContext, def: ddl::TableDef) -> Result<Table> {
    let physical = Arc::new(Schema::new(
        def.columns
            .iter()
            .map(|c| Field::new(&c.name, c.data_type.clone(), c.nullable))
            .collect::<Vec<_>>(),
    ));
    if def.computed.is_empty() {
        return Ok(Table {
            def,
            schema: physical,
        });
    }
    let scratch = format!("__weir_physical_{}", def.name);
    ctx.register_table(
        TableReference::bare(scratch.as_str()),
        Arc::new(StreamTable {
            schema: Arc::clone(&physical),
        }),
    )
    .map_err(|e| def.here.invalid(e.to_string()))?;
    let mut fields: Vec<Field> = physical
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for (name, expr, at) in &def.computed {
        let sql = format!(
            "SELECT {expr} AS {} FROM {}",
            translate::quote(name),
            translate::quote(&scratch)
        );
        let plan = ctx.state().create_logical_plan(&sql).await.map_err(|e| {
            def.here.at(*at).invalid(format!(
                "computed column `{name}` AS {expr}: {}",
                e.strip_backtrace()
            ))
        })?;
        let field = plan.schema().field(0);
        fields.push(Field::new(
            name,
            field.data_type().clone(),
            field.is_nullable(),
        ));
    }
    let _ = ctx.deregister_table(TableReference::bare(scratch.as_str()));
    Ok(Table {
        def,
        schema: Arc::new(Schema::new(fields)),
    })
}

/// Plans and optimizes an `INSERT` (or `EXPLAIN INSERT`) statement with DataFusion.
async fn plan_insert(
    ctx: &SessionContext,
    stmt: &Statement,
    explain: bool,
) -> Result<(
    datafusion::logical_expr::LogicalPlan,
    Vec<translate::temporal::TemporalRef>,
)> {
    let here = &stmt.here;
    if let Some(at) = stmt.find_word("MATCH_RECOGNIZE") {
        return Err(here.at(at).unsupported(
            "MATCH_RECOGNIZE",
            "Weir has no pattern-matching operator (Flink's complex event processing)",
        ));
    }
    let mut tokens = tvf::rewrite(&stmt.tokens, here)?;
    if explain {
        // Drop the leading EXPLAIN: the plans are printed by the caller.
        if let Some(i) = tokens.iter().position(|t| !script::is_trivia(&t.token)) {
            tokens.drain(..=i);
        }
    }
    planning_errors::check_group_by(stmt)?;
    let temporal = translate::temporal::take_temporal_refs(&mut tokens, here)?;
    let parsed = parse_statement(tokens, here)?;
    let state = ctx.state();
    let plan = state
        .statement_to_plan(DfStatement::Statement(Box::new(parsed)))
        .await
        .map_err(|e| planning_error(stmt, &e))?;
    let plan = state
        .optimize(&plan)
        .map_err(|e| planning_error(stmt, &e))?;
    Ok((plan, temporal))
}

/// Parses one statement from its (rewritten) tokens; a syntax error is located in the script.
pub(crate) fn parse_statement(
    tokens: Vec<datafusion::sql::sqlparser::tokenizer::TokenWithSpan>,
    here: &error::Here,
) -> Result<datafusion::sql::sqlparser::ast::Statement> {
    Parser::new(&GenericDialect {})
        .with_tokens_with_locations(tokens)
        .parse_statement()
        .map_err(|e| {
            let text = e.to_string();
            let text = text.strip_prefix("sql parser error: ").unwrap_or(&text);
            here.at(ddl::locate(text).unwrap_or(here.position))
                .syntax(ddl::strip_location(text))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', \
        'path' = 'in.csv', 'format' = 'csv');\n\
        CREATE TABLE o (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', \
        'format' = 'parquet');\n\
        INSERT INTO o SELECT a FROM t;";

    /// `INSERT INTO o SELECT a + 1 + ... FROM t` with `terms` ones after `a`.
    fn chained(terms: usize) -> String {
        SCRIPT.replace(
            "SELECT a FROM",
            &format!("SELECT a{} FROM", " + 1".repeat(terms)),
        )
    }

    #[tokio::test]
    async fn a_chain_deeper_than_the_limit_is_a_located_error_not_a_stack_overflow() {
        let compiler = SqlCompiler::new();
        // The test thread's stack is as small as a runtime worker's (2 MiB).
        let err = compiler
            .compile(&chained(20_000), "deep.sql")
            .await
            .expect_err("too deep");
        let text = err.to_string();
        assert!(text.starts_with("deep.sql:3:"), "{text}");
        assert!(text.contains("more than 1000 levels"), "{text}");
        let nested = SCRIPT.replace(
            "SELECT a FROM",
            &format!("SELECT {}a{} FROM", "(".repeat(5_000), ")".repeat(5_000)),
        );
        let err = compiler
            .compile(&nested, "nested.sql")
            .await
            .expect_err("too deep");
        assert!(err.to_string().contains("more than 1000 levels"), "{err}");
    }

    #[tokio::test]
    async fn a_constant_call_that_would_build_a_huge_value_is_refused_before_planning() {
        let script = SCRIPT.replace("SELECT a FROM", "SELECT a, repeat('x', 1e9) FROM");
        let err = SqlCompiler::new()
            .compile(&script, "big.sql")
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(text.starts_with("big.sql:3:25:"), "{text}");
        assert!(text.contains("repeat(...) asks for 1000000000"), "{text}");
    }

    /// The ids of the operators each statement compiles to.
    async fn operator_ids(script: &str) -> Vec<String> {
        let spec = SqlCompiler::new()
            .compile(script, "ids.sql")
            .await
            .expect("compiles")
            .spec;
        spec.operators
            .iter()
            .filter_map(|o| o.name.clone())
            .chain(spec.sinks.iter().filter_map(|s| s.name.clone()))
            .collect()
    }

    #[tokio::test]
    async fn operator_ids_stay_when_a_statement_changes_elsewhere() {
        let tables = "CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP(3), \
              WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) \
              WITH ('connector' = 'datagen', 'number-of-rows' = '10');\n\
            CREATE TABLE counts (auction BIGINT, n BIGINT) WITH ('connector' = 'blackhole');\n\
            CREATE TABLE cheap (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');\n";
        let window = "INSERT INTO counts SELECT auction, COUNT(*) FROM TABLE(TUMBLE(TABLE bids, \
            DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end;\n";
        let filtered = format!(
            "CREATE VIEW pricey AS SELECT * FROM bids WHERE price > 5;\n{}",
            window.replace("TABLE bids,", "TABLE pricey,")
        );
        let cheap = "INSERT INTO cheap SELECT auction, price FROM bids WHERE price < 10;\n";
        let before = operator_ids(&format!("{tables}{window}")).await;
        let window_ids: Vec<&String> = before.iter().filter(|i| i.contains("window")).collect();
        assert_eq!(window_ids, ["counts_window_bids"], "{before:?}");
        // A filter under the window, and another statement before it, keep its id.
        for changed in [
            format!("{tables}{filtered}"),
            format!("{tables}{cheap}{window}"),
        ] {
            let after = operator_ids(&changed).await;
            assert!(
                after.contains(&"counts_window_bids".to_owned()),
                "{after:?}"
            );
        }
        // A second statement into the same table has ids of its own.
        let twice = operator_ids(&format!("{tables}{window}{window}")).await;
        assert!(
            twice.contains(&"counts_window_bids".to_owned())
                && twice.contains(&"counts_2_window_bids".to_owned()),
            "{twice:?}"
        );
    }

    #[tokio::test]
    async fn quoted_and_non_ascii_table_names_compile() {
        let script = "CREATE TABLE \"Bids\" (a BIGINT, b BIGINT, c AS a + b) WITH (\
            'connector' = 'datagen', 'number-of-rows' = '10');\n\
            CREATE TABLE ergebnisse_größe (a BIGINT) WITH ('connector' = 'blackhole');\n\
            CREATE TABLE \"Größe\" (c BIGINT) WITH ('connector' = 'blackhole');\n\
            INSERT INTO ergebnisse_größe SELECT a FROM \"Bids\";\n\
            INSERT INTO \"Größe\" SELECT c FROM \"Bids\";";
        let spec = SqlCompiler::new()
            .compile(script, "names.sql")
            .await
            .expect("compiles")
            .spec;
        let sinks: Vec<&str> = spec
            .sinks
            .iter()
            .filter_map(|s| s.name.as_deref())
            .collect();
        assert_eq!(sinks, ["ergebnisse_gr__e_sink1", "Gr__e_sink1"]);
        // A quoted name is not the same table as its lower-case spelling.
        let err = SqlCompiler::new()
            .compile(
                &script.replace("FROM \"Bids\";\n", "FROM bids;\n"),
                "names.sql",
            )
            .await
            .expect_err("unknown table");
        assert!(err.to_string().contains("names.sql:4:"), "{err}");
    }

    #[tokio::test]
    async fn each_script_compiles_against_a_catalog_of_its_own() {
        let state = SessionStateBuilder::new().with_default_features().build();
        let compiler = SqlCompiler::with_session_state(state.clone());
        let first = compiler.compile(SCRIPT, "first.sql").await.expect("first");
        // The same table names again, on the same compiler: no "already exists".
        let second = compiler
            .compile(SCRIPT, "second.sql")
            .await
            .expect("second");
        assert_eq!(first.spec.sinks.len(), 1);
        assert_eq!(second.spec.sinks.len(), 1);
        // The state the compiler was made from (the registry's, in the engine) saw no table.
        let ctx = SessionContext::new_with_state(state);
        assert!(!ctx.table_exist("t").expect("lookup"));
        assert!(!ctx.table_exist("o").expect("lookup"));
    }

    #[tokio::test]
    async fn kafka_tables_take_flink_options_and_metadata_columns() {
        let compiler = SqlCompiler::new();
        let script = "CREATE TABLE bids (\n\
              auction BIGINT,\n\
              ts TIMESTAMP(3) METADATA FROM 'timestamp',\n\
              part INT METADATA FROM 'partition' VIRTUAL,\n\
              WATERMARK FOR ts AS ts - INTERVAL '5' SECOND\n\
            ) WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json',\n\
              'properties.bootstrap.servers' = 'b:9092', 'properties.group.id' = 'g',\n\
              'properties.fetch.max.bytes' = '1000000', 'scan.startup.mode' = 'earliest-offset');\n\
            CREATE TABLE out (auction BIGINT,\n\
              ts TIMESTAMP(3) METADATA FROM 'timestamp') WITH ('connector' = 'kafka',\n\
              'topic' = 'out', 'format' = 'json', 'properties.bootstrap.servers' = 'b:9092',\n\
              'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'p');\n\
            INSERT INTO out SELECT auction, ts FROM bids;";
        let spec = compiler
            .compile(script, "k.sql")
            .await
            .expect("compiles")
            .spec;
        let source = &spec.sources[0];
        assert_eq!(source.connector, "kafka");
        assert_eq!(source.options["scan.startup.mode"], "earliest-offset");
        assert_eq!(source.options["properties.fetch.max.bytes"], "1000000");
        assert_eq!(
            source.options["metadata"],
            serde_json::json!({"ts": "timestamp", "part": "partition"})
        );
        let sink = &spec.sinks[0];
        assert_eq!(sink.options["sink.delivery-guarantee"], "exactly-once");
        assert_eq!(
            sink.options["metadata"],
            serde_json::json!({"ts": "timestamp"})
        );
        // A table with a VIRTUAL (read-only) column is not written to.
        let err = compiler
            .compile(
                &script.replace(
                    "INSERT INTO out SELECT auction, ts",
                    "INSERT INTO bids SELECT auction, ts, 1",
                ),
                "v.sql",
            )
            .await
            .expect_err("virtual");
        assert!(err.to_string().contains("VIRTUAL"), "{err}");

        let err = compiler
            .compile(
                "CREATE TABLE t (a BIGINT) WITH ('connector' = 'kafka', 'topic' = 't',\n  \
                 'scan.startup.mod' = 'x');\n\
                 CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
                 INSERT INTO o SELECT a FROM t;",
                "bad.sql",
            )
            .await
            .expect_err("unknown option");
        let text = err.to_string();
        assert!(text.contains("bad.sql:2:3"), "{text}");
        assert!(text.contains("'scan.startup.mod'"), "{text}");
    }

    #[tokio::test]
    async fn s3_options_reach_file_nodes_and_checkpoints() {
        let compiler = SqlCompiler::new();
        let script = "SET 'checkpoint.interval' = '1s';\n\
            SET 'checkpoint.dir' = 's3://cp/job';\n\
            SET 's3.endpoint' = 'http://127.0.0.1:9000';\n\
            SET 's3.path.style.access' = 'true';\n\
            CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', \
            'path' = 's3://in/a.csv', 'format' = 'csv', 's3.region' = 'eu-west-1');\n\
            CREATE TABLE o (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', \
            'format' = 'parquet');\n\
            INSERT INTO o SELECT a FROM t;";
        let compiled = compiler.compile(script, "s3.sql").await.expect("compiles");
        let spec = compiled.spec;
        let source = &spec.sources[0].options["s3"];
        assert_eq!(source["region"], "eu-west-1");
        assert_eq!(source["endpoint"], "http://127.0.0.1:9000");
        assert_eq!(source["path_style"], true);
        assert!(spec.sinks[0].options.get("s3").is_none(), "a local sink");
        let cp = spec.checkpoint.and_then(|c| c.s3).expect("checkpoint s3");
        assert_eq!(cp.endpoint.as_deref(), Some("http://127.0.0.1:9000"));

        let err = compiler
            .compile(
                "CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', \
                 'path' = 's3://in/a.csv', 'format' = 'csv',\n  's3.acess-key' = 'k');\n\
                 CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
                 INSERT INTO o SELECT a FROM t;",
                "bad.sql",
            )
            .await
            .expect_err("unknown S3 option");
        let msg = err.to_string();
        assert!(msg.starts_with("bad.sql:2:3:"), "{msg}");
        assert!(
            msg.contains("s3.acess-key") && msg.contains("s3.access-key"),
            "{msg}"
        );
        let err = compiler
            .compile(
                "CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', \
                 'path' = 'in.csv', 'format' = 'csv', 's3.region' = 'x');\n\
                 CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
                 INSERT INTO o SELECT a FROM t;",
                "local.sql",
            )
            .await
            .expect_err("S3 options on a local path");
        assert!(err.to_string().contains("s3:// 'path'"), "{err}");
    }

    #[tokio::test]
    async fn filters_right_over_a_table_fill_its_prune_conditions() {
        let compiler = SqlCompiler::new();
        let tables = "CREATE TABLE bids (auction BIGINT NOT NULL, price BIGINT, \
            channel STRING, x DOUBLE, ts TIMESTAMP(3), d DECIMAL(10, 2), \
            cents AS price * 100) \
            WITH ('connector' = 'filesystem', 'path' = 'in.parquet', 'format' = 'parquet');\n\
            CREATE TABLE o (auction BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', \
            'format' = 'parquet');\n";
        let prune = |spec: &weir_plan::JobSpec| {
            serde_json::to_value(&spec.sources[0].prune).expect("serializes")
        };
        let script = format!(
            "{tables}INSERT INTO o SELECT auction FROM bids WHERE price > 90000 \
             AND 10 >= auction AND channel IN ('a', 'b') AND x < 1.5 AND d <> CAST(12.5 AS DECIMAL(10, 2)) \
             AND ts >= TIMESTAMP '2026-01-01 00:00:00' AND auction BETWEEN 1 AND 7 \
             AND channel IS NOT NULL AND price + auction > 5 AND cents < 100 \
             AND lower(channel) = 'a';"
        );
        let spec = compiler
            .compile(&script, "p.sql")
            .await
            .expect("compiles")
            .spec;
        // In the order of DataFusion's optimized filter, which drops `10 >= auction` (implied
        // by the BETWEEN) and spells the IN list as ORs.
        assert_eq!(
            prune(&spec),
            serde_json::json!([
                { "column": "channel", "op": "in", "value": ["a", "b"] },
                { "column": "d", "op": "<>", "value": "12.50" },
                { "column": "channel", "op": "is_not_null" },
                { "column": "auction", "op": ">=", "value": 1 },
                { "column": "auction", "op": "<=", "value": 7 },
                { "column": "price", "op": ">", "value": 90000 },
                { "column": "ts", "op": ">=", "value": "2026-01-01T00:00:00" },
                { "column": "x", "op": "<", "value": 1.5 },
            ])
        );
        // Swapped operands, IN lists, and ORs that are not one column's equalities.
        let script = format!(
            "{tables}INSERT INTO o SELECT auction FROM bids WHERE 90000 < price \
             AND auction IN (1, 2, 3, 4, 5, 6, 7) AND (price = 1 OR auction = 2);"
        );
        let spec = compiler
            .compile(&script, "q.sql")
            .await
            .expect("compiles")
            .spec;
        assert_eq!(
            prune(&spec),
            serde_json::json!([
                { "column": "price", "op": ">", "value": 90000 },
                { "column": "auction", "op": "in", "value": [1, 2, 3, 4, 5, 6, 7] },
            ])
        );
        // The filter operator still gets the whole WHERE.
        assert!(
            spec.operators[0].options["predicate"]
                .as_str()
                .is_some_and(|p| p.contains("(price = 1) OR (auction = 2)")),
            "{:?}",
            spec.operators[0].options
        );
        // A table read by two queries skips only what neither keeps; one without a filter
        // keeps everything.
        let two = format!(
            "{tables}INSERT INTO o SELECT auction FROM bids WHERE price > 5 AND auction = 1;\n\
             INSERT INTO o SELECT auction FROM bids WHERE auction = 1 OR price > 5;\n\
             INSERT INTO o SELECT auction FROM bids WHERE auction = 1 AND channel = 'x';"
        );
        let spec = compiler
            .compile(&two, "two.sql")
            .await
            .expect("compiles")
            .spec;
        assert_eq!(spec.sources[0].prune, None);
        let two = format!(
            "{tables}INSERT INTO o SELECT auction FROM bids WHERE price > 5 AND auction = 1;\n\
             INSERT INTO o SELECT auction FROM bids WHERE auction = 1 AND channel = 'x';"
        );
        let spec = compiler
            .compile(&two, "two.sql")
            .await
            .expect("compiles")
            .spec;
        assert_eq!(
            prune(&spec),
            serde_json::json!([{ "column": "auction", "op": "=", "value": 1 }])
        );
        let all = format!(
            "{tables}INSERT INTO o SELECT auction FROM bids WHERE auction = 1;\n\
             INSERT INTO o SELECT auction FROM bids;"
        );
        let spec = compiler
            .compile(&all, "all.sql")
            .await
            .expect("compiles")
            .spec;
        assert_eq!(spec.sources[0].prune, None);
        // Only `filesystem` tables are pruned.
        let generated = "CREATE TABLE g (a BIGINT) WITH ('connector' = 'datagen', \
            'number-of-rows' = '10');\n\
            CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
            INSERT INTO o SELECT a FROM g WHERE a > 3;";
        let spec = compiler
            .compile(generated, "g.sql")
            .await
            .expect("compiles")
            .spec;
        assert_eq!(spec.sources[0].prune, None);
        // Nor CSV or JSON files, whose readers do not prune.
        let csv = "CREATE TABLE c (a BIGINT) WITH ('connector' = 'filesystem', \
            'path' = 'in.csv', 'format' = 'csv');\n\
            CREATE TABLE o (a BIGINT) WITH ('connector' = 'blackhole');\n\
            INSERT INTO o SELECT a FROM c WHERE a > 3;";
        let spec = compiler.compile(csv, "c.sql").await.expect("compiles").spec;
        assert_eq!(spec.sources[0].prune, None);
        // A table with a watermark is never pruned.
        let watermarked = "CREATE TABLE bids (auction BIGINT, ts TIMESTAMP(3), \
            WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', \
            'path' = 'in.parquet', 'format' = 'parquet');\n\
            CREATE TABLE o (auction BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', \
            'format' = 'parquet');\n\
            INSERT INTO o SELECT auction FROM bids WHERE auction > 3;";
        let spec = compiler
            .compile(watermarked, "w.sql")
            .await
            .expect("compiles")
            .spec;
        assert_eq!(spec.sources[0].prune, None);
        assert!(spec.sources[0].watermark.is_some());
    }
}
