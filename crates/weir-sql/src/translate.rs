//! DataFusion's optimized `LogicalPlan` of an `INSERT` -> Weir job-spec nodes.
//!
//! Each plan node becomes the Weir operator that does the same on a stream: `Filter` ->
//! `filter`, `Projection` -> `project` (only where it computes something; pure column selection
//! and renaming only changes which physical column a plan column means), `Union` -> `union`,
//! an `Aggregate` over a window TVF -> `window`, a table scan -> the table's source. Expressions
//! are written back to SQL text with DataFusion's unparser, over the physical column names, so
//! the `filter`/`project` operators plan exactly the expression DataFusion optimized.
//! Joins, OVER, Top-N, deduplication and aggregates without a window have modules of their own
//! below. Constructs a stream cannot run (ORDER BY, LIMIT, ...: docs/sql.md, "What is refused")
//! are refused with their position in the statement.

use crate::error::{Here, Result};
use crate::job_builder::{JobBuilder, Settings};
use crate::script::Statement;
use crate::tvf::{StreamTable, WindowTvfTable};
use changes::{Changes, Since};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, Filter, LogicalPlan, Projection, TableScan, Union, WriteOp};
use datafusion::sql::unparser::expr_to_sql;
use std::any::Any;

mod aggregates;
mod changes;
mod group;
mod join;
mod late;
mod over;
mod rank;
pub(crate) mod temporal;
mod window_aggregate;
mod window_input;
mod window_tvf;

/// The window operator's update marker column (late policy `update`).
pub(crate) const UPDATE_MARKER: &str = "__weir_window_update";

/// Prefix of plan columns that do not exist on the physical stream yet (window bounds).
const VIRTUAL: &str = "\u{0}";

/// A translated relation: the node that produces it and, per plan column, the physical column.
#[derive(Debug, Clone)]
struct Stream {
    node: String,
    columns: Vec<String>,
    /// The physical stream also carries the window update marker (late policy `update`),
    /// which the plan does not know; an INSERT can write it to a column of that name.
    marker: bool,
    /// Whether the rows are final (inserts) or changes of results that update.
    changes: Changes,
    /// The table scan ([`JobBuilder::scan`]) whose rows these are, unchanged but maybe
    /// filtered: a filter on them tells the source what it may skip.
    scan: Option<usize>,
    /// The physical columns that are the rows' time attributes: their table's `WATERMARK FOR`
    /// column, the `window_time` a window aggregation grouped by, both times of an interval
    /// join; carried through filters and projections that keep them. No row of the stream is
    /// behind the watermark in them, so a window or an interval join can follow.
    rowtimes: Vec<String>,
    /// The physical columns that hold the rows' window bounds (after a window table function
    /// or a window aggregation, carried through filters and projections that keep both).
    window: Option<Bounds>,
}

/// The physical columns of a stream's window bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bounds {
    start: String,
    end: String,
    /// `window_time` (`window_end - 1 ms`), where the stream has it (after a window TVF).
    time: Option<String>,
}

impl Bounds {
    /// The bounds a window aggregation emits.
    fn aggregated() -> Self {
        Self {
            start: "window_start".to_owned(),
            end: "window_end".to_owned(),
            time: None,
        }
    }

    /// The bounds a window table function emits.
    fn assigned() -> Self {
        Self {
            time: Some("window_time".to_owned()),
            ..Self::aggregated()
        }
    }

    /// The bounds under new names, `None` when `rename` loses the start or the end.
    fn renamed(&self, rename: impl Fn(&str) -> Option<String>) -> Option<Self> {
        Some(Self {
            start: rename(&self.start)?,
            end: rename(&self.end)?,
            time: self.time.as_deref().and_then(&rename),
        })
    }
}

/// Translates the statements of one script into one job.
pub(crate) struct Translator<'a> {
    pub(crate) job: &'a mut JobBuilder,
    pub(crate) settings: &'a Settings,
    pub(crate) stmt: &'a Statement,
    /// Prefix of the nodes of this statement: the table it inserts into (`result_`), with
    /// `_2`, `_3`, ... for further statements inserting into the same table.
    pub(crate) prefix: String,
    /// Per kind of node, how many this statement has named: the `2` of `result_filter2`.
    pub(crate) counters: std::collections::BTreeMap<String, usize>,
    /// Every node name this statement made.
    pub(crate) named: std::collections::BTreeSet<String>,
    /// The `ROW_NUMBER()` window under a `rn <= N` filter being translated, and N: it becomes
    /// a `window_top_n` or `dedup_first` operator ([`Translator::rank`]).
    pub(crate) row_number: Option<(*const datafusion::logical_expr::Window, i64)>,
    /// `top_n` operators whose row number no projection has dropped yet
    /// ([`Translator::unnumbered`]).
    pub(crate) numbered: Vec<String>,
    /// `top_n` operators that keep the last row of each key by its time attribute (versioned
    /// views), with their input's columns: a temporal join reading one turns it into a
    /// projection ([`Translator::versions_of_view`]).
    pub(crate) versioned_views: Vec<(String, Vec<String>)>,
    /// The tables the statement reads `FOR SYSTEM_TIME AS OF` a time.
    pub(crate) temporal: Vec<temporal::TemporalRef>,
}

/// `text` with every character a node name cannot hold as `_`.
fn node_name_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn is_simple_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

impl<'a> Translator<'a> {
    fn here(&self) -> &'a Here {
        &self.stmt.here
    }

    /// An error at the first occurrence of `word` in the statement (or at its start).
    fn unsupported_at(&self, word: &str, construct: &str, reason: &str) -> crate::error::SqlError {
        let position = self.stmt.find_word(word).unwrap_or(self.here().position);
        self.here().at(position).unsupported(construct, reason)
    }

    /// Adds a `project` node computing `expressions` over `input`; returns its name.
    fn project(&mut self, input: &str, expressions: Vec<String>) -> String {
        let node = self.next_name("project");
        self.job.operator(
            &node,
            "project",
            input,
            None,
            serde_json::json!({ "expressions": expressions }),
        );
        node
    }

    /// The next node name: the statement's prefix, then `kind` (which may hold a table's name
    /// in any script) and how many nodes of that kind the statement has named, so
    /// `result_filter1`. The statement's stateful operators are named again by what they are
    /// and what they read once it is translated ([`JobBuilder::name_by_lineage`]).
    fn next_name(&mut self, kind: &str) -> String {
        let kind = node_name_part(kind);
        let n = self.counters.entry(kind.clone()).or_default();
        *n += 1;
        let name = format!("{}{kind}{n}", self.prefix);
        self.named.insert(name.clone());
        name
    }

    /// Translates the plan of `INSERT INTO table SELECT ...`.
    pub(crate) fn insert(&mut self, plan: &LogicalPlan) -> Result<()> {
        let LogicalPlan::Dml(dml) = plan else {
            return Err(self.here().invalid("expected INSERT INTO ... SELECT ..."));
        };
        if !matches!(dml.op, WriteOp::Insert(_)) {
            return Err(self.unsupported_at(
                "UPDATE",
                &dml.op.to_string(),
                "only INSERT INTO writes to tables",
            ));
        }
        let table = dml.table_name.table().to_owned();
        self.prefix = format!("{}_", self.job.statement_name(&node_name_part(&table)));
        let mut input = self.plan(&dml.input)?;
        self.check_upsert_key(&table, &input)?;
        if let Changes::Updating { since, .. } = &input.changes
            && let Some(sink) = self.job.inserts_only(&table, self.here())?
        {
            return Err(self.unsupported_at(
                &since.word,
                &format!("INSERT INTO {table} of updating results"),
                &format!(
                    "the results of {} change as rows arrive, and `{table}` ({sink}) writes only \
                     inserts; declare it with 'format' = 'debezium-json' or 'changelog-json', or \
                     aggregate over a window",
                    since.what
                ),
            ));
        }
        let sink_columns = self.job.sink_columns(&table, self.here())?;
        // The update marker goes to the table's column of that name, if it has one.
        if input.marker
            && sink_columns.len() == input.columns.len() + 1
            && let Some(i) = sink_columns.iter().position(|c| c == UPDATE_MARKER)
        {
            input.columns.insert(i, UPDATE_MARKER.to_owned());
        }
        if sink_columns.len() != input.columns.len() {
            return Err(self.here().invalid(format!(
                "INSERT INTO {table}: the query has {} columns, the table {}",
                input.columns.len(),
                sink_columns.len()
            )));
        }
        // Name the columns as the table does (positionally, as INSERT does).
        // Name the columns as the table does (positionally, as INSERT does) and give them the
        // table's types: the window's results can be narrower than DataFusion planned (SUM of
        // a FLOAT stays FLOAT), so the table's declaration decides what is written.
        let types = self.job.sink_types(&table, self.here())?;
        let expressions: Vec<String> = input
            .columns
            .iter()
            .zip(&sink_columns)
            .zip(&types)
            .map(|((from, to), data_type)| {
                if to == UPDATE_MARKER {
                    quote(from)
                } else {
                    format!(
                        "arrow_cast({}, '{data_type}') AS {}",
                        quote(from),
                        quote(to)
                    )
                }
            })
            .collect();
        let node = self.project(&input.node, expressions);
        let stream = Stream {
            node,
            columns: sink_columns,
            marker: false,
            changes: Changes::InsertOnly,
            scan: None,
            rowtimes: Vec::new(),
            window: None,
        };
        let name = self.next_name("sink");
        self.job.sink(&name, &table, &stream.node, self.here())?;
        self.job.name_by_lineage(&self.prefix, &self.named);
        Ok(())
    }

    /// Translates one plan node (and its inputs) into the operators that compute it on a
    /// stream: each variant's translation, or the reason a stream cannot run it.
    fn plan(&mut self, plan: &LogicalPlan) -> Result<Stream> {
        match plan {
            LogicalPlan::TableScan(scan) => self.table_scan(scan),
            LogicalPlan::SubqueryAlias(alias) => self.plan(&alias.input),
            LogicalPlan::Filter(filter) if self.is_row_number_filter(filter)? => {
                // `rn <= N` holds for every row the rank operator emits.
                self.plan(&filter.input)
            }
            LogicalPlan::Window(w) if self.row_number.is_some_and(|(p, _)| std::ptr::eq(p, w)) => {
                self.rank(w)
            }
            LogicalPlan::Filter(filter) if temporal::only_as_of(&filter.predicate) => {
                // The temporal join's marker, copied onto one side by predicate inference.
                self.plan(&filter.input)
            }
            LogicalPlan::Filter(filter) => self.filter(filter),
            LogicalPlan::Projection(projection) => self.projection(projection),
            LogicalPlan::Union(union) => self.union(union),
            LogicalPlan::Aggregate(agg) => self.window_aggregate(agg),
            LogicalPlan::Sort(_) => Err(self.unsupported_at(
                "ORDER",
                "ORDER BY",
                "an unbounded stream has no last row to sort by; sort the output in the sink's \
                 consumer",
            )),
            LogicalPlan::Limit(_) => {
                Err(self.unsupported_at("LIMIT", "LIMIT", "a streaming job reads its whole input"))
            }
            LogicalPlan::Join(join) => self.join(join),
            LogicalPlan::Window(w) => self.over(w),
            LogicalPlan::Distinct(datafusion::logical_expr::Distinct::All(input)) => {
                self.distinct(input)
            }
            LogicalPlan::Distinct(_) => Err(self.unsupported_at(
                "DISTINCT",
                "SELECT DISTINCT ON",
                "keep the first or last row of each key with ROW_NUMBER() instead",
            )),
            LogicalPlan::EmptyRelation(_) | LogicalPlan::Values(_) => Err(self.unsupported_at(
                "VALUES",
                "a query without a table",
                "read from a table declared with CREATE TABLE",
            )),
            other => Err(self.unsupported_at(
                "SELECT",
                &format!("`{}`", other.display()),
                "this part of the query has no streaming operator",
            )),
        }
    }

    /// A table scan: the table's source (an upsert table's normalized into changes), with the
    /// columns the query reads recorded; or a window TVF's translation.
    fn table_scan(&mut self, scan: &TableScan) -> Result<Stream> {
        let provider =
            source_as_provider(&scan.source).map_err(|e| self.here().invalid(e.to_string()))?;
        let any = provider.as_ref() as &dyn Any;
        if let Some(tvf) = any.downcast_ref::<WindowTvfTable>() {
            return self.window_tvf(scan, tvf);
        }
        if any.downcast_ref::<StreamTable>().is_none() {
            return Err(self.here().invalid(format!(
                "`{}` is not a table declared with CREATE TABLE",
                scan.table_name
            )));
        }
        let table = scan.table_name.table().to_owned();
        let node = self.job.source(&table, self.here())?;
        let schema = provider.schema();
        let columns: Vec<String> = match &scan.projection {
            Some(indices) => indices
                .iter()
                .map(|&i| schema.field(i).name().clone())
                .collect(),
            None => schema.fields().iter().map(|f| f.name().clone()).collect(),
        };
        self.job.reads(&table, columns.iter().cloned());
        let scan = self.job.scan(&table);
        let rowtimes = self.job.rowtime(&table).into_iter().collect();
        let (node, changes) = self.table_changes(&table, node)?;
        Ok(Stream {
            node,
            columns,
            marker: false,
            changes,
            scan: Some(scan),
            rowtimes,
            window: None,
        })
    }

    /// A `filter` operator; over a table's rows, also what of the predicate the source may
    /// skip input by (predicate pushdown).
    fn filter(&mut self, filter: &Filter) -> Result<Stream> {
        let input = self.plan(&filter.input)?;
        if let Some(scan) = input.scan {
            // Predicate pushdown: what of the filter the source can skip input by.
            let schema = filter.input.schema();
            let conditions = crate::prune::conditions(&filter.predicate, |c| {
                let i = schema.index_of_column(c).ok()?;
                self.job.physical_column(scan, input.columns.get(i)?)
            });
            self.job.scan_conditions(scan, conditions);
        }
        let predicate = self.sql(&filter.predicate, filter.input.schema(), &input)?;
        let node = self.next_name("filter");
        self.job.operator(
            &node,
            "filter",
            &input.node,
            None,
            serde_json::json!({ "predicate": predicate }),
        );
        Ok(Stream {
            node,
            columns: input.columns,
            marker: input.marker,
            changes: input.changes.clone(),
            scan: input.scan,
            rowtimes: input.rowtimes,
            window: input.window,
        })
    }

    /// A projection: no operator where it only selects and renames columns (which physical
    /// column a plan column means changes), else a `project` operator.
    fn projection(&mut self, projection: &Projection) -> Result<Stream> {
        let input = self.plan(&projection.input)?;
        match self.selected_columns(projection, &input)? {
            Some(columns) => Ok(self.selection(input, columns)),
            None => self.computed_projection(projection, input),
        }
    }

    /// The physical columns of `input` a projection selects, when it only selects columns.
    fn selected_columns(
        &self,
        projection: &Projection,
        input: &Stream,
    ) -> Result<Option<Vec<String>>> {
        let in_schema = projection.input.schema();
        let mut columns = Vec::with_capacity(projection.expr.len());
        for e in &projection.expr {
            match unalias(e) {
                Expr::Column(c) => {
                    let i = in_schema
                        .index_of_column(c)
                        .map_err(|err| self.here().invalid(err.to_string()))?;
                    columns.push(input.columns[i].clone());
                }
                _ => break,
            }
        }
        Ok((columns.len() == projection.expr.len()).then_some(columns))
    }

    /// `input` as the physical `columns` a pure selection names, on the same node.
    fn selection(&mut self, input: Stream, columns: Vec<String>) -> Stream {
        self.unnumbered(&input.node, columns.iter().map(String::as_str));
        // Time attributes the query does not select stay too (for a temporal join, whose
        // versioned side's time the query need not name): a time attribute is found through a
        // plan column, so one that no plan column names is unused.
        let rowtimes = input.rowtimes;
        // The physical columns stay as they are, the window's too.
        let window = input.window;
        Stream {
            node: input.node,
            columns,
            marker: input.marker,
            changes: input.changes.clone(),
            scan: input.scan,
            rowtimes,
            window,
        }
    }

    /// A `project` operator computing a projection's expressions, with the time attributes,
    /// window bounds and update keys it passes on under their new names.
    fn computed_projection(&mut self, projection: &Projection, input: Stream) -> Result<Stream> {
        let in_schema = projection.input.schema();
        let mut expressions = Vec::with_capacity(projection.expr.len());
        let mut names = Vec::with_capacity(projection.expr.len());
        let mut rowtimes: Vec<String> = Vec::new();
        // Input columns passed on unchanged, by their new names.
        let mut passed: Vec<(String, String)> = Vec::new();
        for (i, (e, field)) in projection
            .expr
            .iter()
            .zip(projection.schema.fields())
            .enumerate()
        {
            let name = if is_simple_name(field.name()) && !names.contains(field.name()) {
                field.name().clone()
            } else {
                format!("_c{i}")
            };
            let text = self.sql(unalias(e), in_schema, &input)?;
            expressions.push(format!("{text} AS {}", quote(&name)));
            // The time attribute passes through a projection that selects it.
            if let Expr::Column(c) = unalias(e)
                && let Ok(i) = in_schema.index_of_column(c)
            {
                if input.rowtimes.contains(&input.columns[i])
                    && !passed.iter().any(|(from, _)| *from == input.columns[i])
                {
                    rowtimes.push(name.clone());
                }
                passed.push((input.columns[i].clone(), name.clone()));
            }
            names.push(name);
        }
        self.unnumbered(&input.node, expressions.iter().map(String::as_str));
        if input.marker {
            expressions.push(UPDATE_MARKER.to_owned());
        }
        // A window time the query does not select rides along, for a window join.
        if let Some(time) = input.window.as_ref().and_then(|w| w.time.as_ref())
            && !passed.iter().any(|(from, _)| from == time)
            && !names.contains(time)
        {
            expressions.push(quote(time));
            passed.push((time.clone(), time.clone()));
        }
        let node = self.project(&input.node, expressions);
        let window = input.window.and_then(|w| {
            w.renamed(|c| {
                passed
                    .iter()
                    .find(|(from, _)| from == c)
                    .map(|(_, to)| to.clone())
            })
        });
        let changes = input.changes.renamed(|c| {
            passed
                .iter()
                .find(|(from, _)| from == c)
                .map(|(_, to)| to.clone())
        });
        Ok(Stream {
            node,
            columns: names,
            marker: input.marker,
            changes,
            scan: None,
            rowtimes,
            window,
        })
    }

    /// A `union` of the inputs, each projected to the union's column names; when one input
    /// updates, the others' rows are marked as inserts.
    fn union(&mut self, union: &Union) -> Result<Stream> {
        let mut inputs = Vec::with_capacity(union.inputs.len());
        let names: Vec<String> = union
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if is_simple_name(f.name()) {
                    f.name().clone()
                } else {
                    format!("_c{i}")
                }
            })
            .collect();
        let mut streams = Vec::with_capacity(union.inputs.len());
        for input in &union.inputs {
            streams.push(self.plan(input)?);
        }
        let updating = streams
            .iter()
            .find(|s| s.changes.is_updating())
            .map(|s| match &s.changes {
                Changes::Updating { since, .. } => Changes::Updating {
                    key: None,
                    since: since.clone(),
                },
                Changes::InsertOnly => Changes::InsertOnly,
            });
        for stream in streams {
            let mut expressions: Vec<String> = stream
                .columns
                .iter()
                .zip(&names)
                .map(|(from, to)| format!("{} AS {}", quote(from), quote(to)))
                .collect();
            if updating.is_some() && !stream.changes.is_updating() {
                // Every input of a union has the same columns: inserts say so.
                expressions.push(format!(
                    "arrow_cast(0, 'Int8') AS {}",
                    weir_api::ROW_KIND_COLUMN
                ));
            }
            let node = self.project(&stream.node, expressions);
            inputs.push(node);
        }
        let node = self.next_name("union");
        self.job.union(&node, &inputs);
        Ok(Stream {
            node,
            columns: names,
            marker: false,
            changes: updating.unwrap_or(Changes::InsertOnly),
            scan: None,
            rowtimes: Vec::new(),
            window: None,
        })
    }

    /// `expr` over the plan schema `schema` as SQL text over the physical columns of `input`.
    fn sql(&self, expr: &Expr, schema: &DFSchema, input: &Stream) -> Result<String> {
        let rewritten = expr
            .clone()
            .transform_up(|e| match e {
                Expr::Column(c) => {
                    let i = schema.index_of_column(&c)?;
                    Ok(Transformed::yes(Expr::Column(Column::new_unqualified(
                        input.columns[i].clone(),
                    ))))
                }
                other => Ok(Transformed::no(other)),
            })
            .map_err(|e| self.here().invalid(e.to_string()))?
            .data;
        self.sql_over(&rewritten)
    }

    /// Replaces the columns of `expr` (over `schema`) with the expressions `exprs` gives them.
    fn substitute(&self, expr: &Expr, schema: &DFSchema, exprs: &[Expr]) -> Result<Expr> {
        expr.clone()
            .transform_up(|e| match e {
                Expr::Column(c) => {
                    let i = schema.index_of_column(&c)?;
                    Ok(Transformed::yes(exprs[i].clone()))
                }
                other => Ok(Transformed::no(other)),
            })
            .map(|t| t.data)
            .map_err(|e| self.here().invalid(e.to_string()))
    }

    /// `expr` (over unqualified physical column names) as SQL text.
    fn sql_over(&self, expr: &Expr) -> Result<String> {
        let mut virtual_column = None;
        let _ = expr.apply(|e| {
            if let Expr::Column(c) = e
                && c.name.starts_with(VIRTUAL)
            {
                virtual_column = Some(c.name.trim_start_matches(VIRTUAL).to_owned());
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        });
        if let Some(column) = virtual_column {
            return Err(self.unsupported_at(
                &column,
                &format!("`{column}` before the aggregation"),
                "window bounds exist after GROUP BY window_start, window_end",
            ));
        }
        expr_to_sql(expr).map(|sql| sql.to_string()).map_err(|e| {
            self.here()
                .invalid(format!("cannot express `{expr}` as SQL: {e}"))
        })
    }
}

fn unalias(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unalias(&a.expr),
        other => other,
    }
}

fn column_name(e: &Expr) -> String {
    match e {
        Expr::Column(c) => c.name.clone(),
        other => other.to_string(),
    }
}

/// A column name as a SQL identifier: quoted unless it is lower-case alphanumeric.
pub(crate) fn quote(name: &str) -> String {
    if is_simple_name(name) {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}
