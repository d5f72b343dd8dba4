//! A table's `WITH` options as its source's or sink's connector options in the job spec:
//! each key mapped to the spec's name for it and checked (unknown keys, and keys of a role the
//! connector cannot play, refused at the key with the closest known one), and where each was
//! written recorded for errors found in the built job.

use super::{changes, option};
use crate::connectors::{CONNECTORS, Connector, OptionMap, Partitions};
use crate::ddl::TableDef;
use crate::error::{Position, Result, did_you_mean};
use crate::positions::SpecPositions;
use weir_api::S3Options;

/// The watermark options a table's WITH clause may set (Flink's `scan.` names too).
const WATERMARK_OPTIONS: [&str; 7] = [
    "watermark.interval",
    "watermark.lateness",
    "scan.watermark.lateness",
    "watermark.idle-timeout",
    "scan.watermark.idle-timeout",
    "watermark.alignment.max-drift",
    "scan.watermark.alignment.max-drift",
];

/// Whether a table is read (source) or written (sink).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Read,
    Write,
}

/// The job-spec connector and options of `table` in `role`. Options of the other role are
/// accepted and left out (one table can be read by one job and written by another); unknown
/// keys are refused with their position.
pub(super) fn connector_options(
    table: &TableDef,
    role: Role,
) -> Result<(&'static str, serde_json::Value)> {
    let (name, connector) = find_connector(table)?;
    let of = role_options(table, name, connector, role)?;
    let mut out = serde_json::Map::new();
    let mut s3 = S3Options::default();
    for (key, (value, at)) in &table.options {
        map_option(table, &of, key, value, *at, &mut out, &mut s3)?;
    }
    changes::changelog_options(table, connector.spec, role, &mut out)?;
    check_writable(table, role)?;
    add_partitions(table, name, connector, role, &mut out)?;
    add_metadata(table, connector, &mut out)?;
    add_s3(table, s3, &mut out)?;
    Ok((connector.spec, serde_json::Value::Object(out)))
}

/// The table's `'connector'` option and the connector it names; a missing option is refused at
/// the table, an unknown name at the option, with the closest known name.
fn find_connector(table: &TableDef) -> Result<(&str, &'static Connector)> {
    let name = option(table, "connector").ok_or_else(|| {
        table.here.invalid(format!(
            "table `{}` has no 'connector' option: WITH ('connector' = 'filesystem', 'path' = \
             ..., 'format' = ...)",
            table.name
        ))
    })?;
    let all: Vec<&str> = CONNECTORS
        .iter()
        .flat_map(|c| c.sql.iter().copied())
        .collect();
    let connector = CONNECTORS
        .iter()
        .find(|c| c.sql.contains(&name))
        .ok_or_else(|| {
            let at = table
                .options
                .get("connector")
                .map_or(table.here.position, |(_, at)| *at);
            table.here.at(at).invalid(format!(
                "table `{}`: unknown connector '{name}'{}; known: {}",
                table.name,
                did_you_mean(name, all.iter().copied()),
                all.join(", ")
            ))
        })?;
    Ok((name, connector))
}

/// What a table's options are read against: its connector, the options of its role (and the
/// common ones), and the options of the other role, accepted and left out.
struct RoleOptions {
    connector: &'static Connector,
    known: Vec<&'static OptionMap>,
    other: Option<&'static [OptionMap]>,
}

/// The options `connector` (named `name` in the table) takes in `role`; a role the connector
/// cannot play is refused.
fn role_options(
    table: &TableDef,
    name: &str,
    connector: &'static Connector,
    role: Role,
) -> Result<RoleOptions> {
    let (known, other) = match role {
        Role::Read => (connector.read, connector.write),
        Role::Write => (connector.write, connector.read),
    };
    let Some(known) = known else {
        return Err(table.here.invalid(format!(
            "table `{}`: connector '{name}' cannot be {}",
            table.name,
            if role == Role::Read {
                "read"
            } else {
                "written"
            }
        )));
    };
    Ok(RoleOptions {
        connector,
        known: known.iter().chain(connector.common).collect(),
        other,
    })
}

/// One `WITH` option (`key` = `value`, the key at `at`) into the spec's options `out`, or
/// into `s3` (a file table's `'s3.*'`); watermark options are checked here and read with the
/// watermark, an unknown key is refused at it with the closest known key.
fn map_option(
    table: &TableDef,
    of: &RoleOptions,
    key: &String,
    value: &String,
    at: Position,
    out: &mut serde_json::Map<String, serde_json::Value>,
    s3: &mut S3Options,
) -> Result<()> {
    let connector = of.connector;
    if key.starts_with("watermark.") || key.starts_with("scan.watermark.") {
        return check_watermark_option(table, key, value, at);
    }
    if key == "connector" {
        return Ok(());
    }
    if takes_s3(connector.spec) && key.starts_with("s3.") {
        return s3.set_sql(key, value).map_err(|m| {
            table
                .here
                .at(at)
                .invalid(format!("table `{}`: {m}", table.name))
        });
    }
    if let Some((_, spec_key, numeric)) = of.known.iter().find(|(k, _, _)| k == key) {
        let v = option_value(table, key, value, at, *numeric)?;
        if out.insert((*spec_key).to_owned(), v).is_some() {
            // Two spellings of one option (`sink.bytes-per-file` and Flink's
            // `sink.rolling-policy.file-size`): refused rather than one silently winning.
            let both: Vec<&str> = of
                .known
                .iter()
                .filter(|(k, s, _)| s == spec_key && table.options.contains_key(*k))
                .map(|(k, _, _)| *k)
                .collect();
            return Err(table.here.at(at).invalid(format!(
                "table `{}` sets one option twice: '{}' are spellings of the same option",
                table.name,
                both.join("' and '")
            )));
        }
        return Ok(());
    }
    if of.other.is_some_and(|o| o.iter().any(|(k, _, _)| k == key)) {
        return Ok(());
    }
    if connector.passthrough.iter().any(|p| key.starts_with(p)) {
        out.insert(key.clone(), serde_json::json!(value));
        return Ok(());
    }
    // `fields.<column>.<option>` style keys (datagen).
    if let Some((prefix, spec_key)) = connector
        .prefix_maps
        .iter()
        .find(|(p, _)| key.starts_with(p))
        && let Some((column, opt)) = key[prefix.len()..].split_once('.')
    {
        add_prefix_map_option(out, spec_key, column, opt, value);
        return Ok(());
    }
    let keys: Vec<&str> = of.known.iter().map(|(k, _, _)| *k).collect();
    Err(table.here.at(at).invalid(format!(
        "unknown option '{key}' for table `{}`{}; known: {}",
        table.name,
        did_you_mean(key, keys.iter().copied()),
        keys.join(", ")
    )))
}

/// Checks a `watermark.*` (or `scan.watermark.*`) option at `at`: a known key, and a lateness
/// of `split` or `merged`.
fn check_watermark_option(table: &TableDef, key: &str, value: &str, at: Position) -> Result<()> {
    if !WATERMARK_OPTIONS.contains(&key) {
        return Err(table.here.at(at).invalid(format!(
            "unknown watermark option '{key}' for table `{}`{}\nknown: {}",
            table.name,
            did_you_mean(key, WATERMARK_OPTIONS.iter().copied()),
            WATERMARK_OPTIONS.join(", ")
        )));
    }
    if key.ends_with(".lateness") && value != "split" && value != "merged" {
        return Err(table.here.at(at).invalid(format!(
            "'{key}' of table `{}` is '{value}': it must be 'split' (a row is late \
             behind its own split's watermark) or 'merged' (behind the operator's)",
            table.name
        )));
    }
    Ok(())
}

/// A known option's value as the spec takes it: a whole number where the option is
/// `numeric` (anything else refused at `at`), a boolean for `true`/`false`, else the text.
fn option_value(
    table: &TableDef,
    key: &str,
    value: &str,
    at: Position,
    numeric: bool,
) -> Result<serde_json::Value> {
    if numeric {
        match value.parse::<u64>() {
            Ok(n) => Ok(serde_json::json!(n)),
            Err(_) => Err(table.here.at(at).invalid(format!(
                "option '{key}' of table `{}` is a whole number, not '{value}'",
                table.name
            ))),
        }
    } else if value == "true" || value == "false" {
        Ok(serde_json::json!(value == "true"))
    } else {
        Ok(serde_json::json!(value))
    }
}

/// `prefix.<column>.<opt>` = `value` as `out[spec_key][column][opt]` (dashes in `opt` as
/// underscores), the value a number where it reads as one.
fn add_prefix_map_option(
    out: &mut serde_json::Map<String, serde_json::Value>,
    spec_key: &str,
    column: &str,
    opt: &str,
    value: &str,
) {
    let v = value
        .parse::<i64>()
        .map(|n| serde_json::json!(n))
        .or_else(|_| value.parse::<f64>().map(|f| serde_json::json!(f)))
        .unwrap_or_else(|_| serde_json::json!(value));
    let entry = out
        .entry(spec_key.to_owned())
        .or_insert_with(|| serde_json::json!({}));
    entry[column] = entry.get(column).cloned().unwrap_or(serde_json::json!({}));
    entry[column][opt.replace('-', "_")] = v;
}

/// Refuses to write a table with a VIRTUAL (read-only) metadata column.
fn check_writable(table: &TableDef, role: Role) -> Result<()> {
    if role == Role::Write
        && let Some(c) = table
            .columns
            .iter()
            .find(|c| c.metadata.as_ref().is_some_and(|m| m.is_virtual))
    {
        return Err(table.here.invalid(format!(
            "table `{}` has the VIRTUAL (read-only) metadata column `{}` and cannot be written \
             to; write to a table declared without it",
            table.name, c.name
        )));
    }
    Ok(())
}

/// The `partition_by` option (the `PARTITIONED BY` columns) of a table whose connector takes
/// partitions in `role`; `PARTITIONED BY` on any other connector is refused at the clause.
fn add_partitions(
    table: &TableDef,
    name: &str,
    connector: &Connector,
    role: Role,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let Some((columns, at)) = &table.partitioned_by else {
        return Ok(());
    };
    if connector.partitions == Partitions::Refused {
        let takes: Vec<&str> = CONNECTORS
            .iter()
            .filter(|c| c.partitions != Partitions::Refused)
            .flat_map(|c| c.sql.iter().copied())
            .collect();
        return Err(table.here.at(*at).invalid(format!(
            "table `{}`: connector '{name}' does not take PARTITIONED BY (connectors that do: {})",
            table.name,
            takes.join(", ")
        )));
    }
    if role == Role::Read && connector.partitions == Partitions::Sink {
        return Ok(());
    }
    let names: Vec<&str> = columns.iter().map(|(c, _)| c.as_str()).collect();
    out.insert("partition_by".to_owned(), serde_json::json!(names));
    Ok(())
}

/// The `metadata` option (column -> metadata key) of a table with METADATA columns, which
/// only the kafka connector has.
fn add_metadata(
    table: &TableDef,
    connector: &Connector,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let metadata: serde_json::Map<String, serde_json::Value> = table
        .columns
        .iter()
        .filter_map(|c| c.metadata.as_ref().map(|m| (c, m)))
        .map(|(c, m)| (c.name.clone(), serde_json::json!(m.key)))
        .collect();
    if !metadata.is_empty() {
        if connector.spec != "kafka" {
            return Err(table.here.invalid(format!(
                "table `{}`: METADATA columns are supported by the kafka connector only",
                table.name
            )));
        }
        out.insert("metadata".to_owned(), serde_json::Value::Object(metadata));
    }
    Ok(())
}

/// Whether tables of job-spec connector `spec` take `'s3.*'` options (an `s3` object).
fn takes_s3(spec: &str) -> bool {
    matches!(spec, "file" | "delta")
}

/// The `s3` option of a file table that sets `'s3.*'` options, which apply to an s3://
/// `'path'` only (refused at the first of them otherwise).
fn add_s3(
    table: &TableDef,
    s3: S3Options,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    if !s3.is_empty() {
        let path = option(table, "path").unwrap_or_default();
        if !weir_api::is_s3_url(path) {
            let at = table
                .options
                .iter()
                .find(|(k, _)| k.starts_with("s3."))
                .map_or(table.here.clone(), |(_, (_, at))| table.here.at(*at));
            return Err(at.invalid(format!(
                "table `{}`: 's3.*' options apply to an s3:// 'path', not '{path}'",
                table.name
            )));
        }
        out.insert(
            "s3".to_owned(),
            serde_json::to_value(&s3).unwrap_or_default(),
        );
    }
    Ok(())
}

/// Records where the node at JSON path `node` (a source or sink that `table` became in `role`)
/// and its connector, options, watermark and computed columns were written.
pub(super) fn record_table(
    positions: &mut SpecPositions,
    node: &str,
    table: &TableDef,
    role: Role,
) {
    let name = &table.name;
    positions.insert(
        node.to_owned(),
        table.here.position,
        format!("table `{name}`"),
    );
    let connector =
        option(table, "connector").and_then(|n| CONNECTORS.iter().find(|c| c.sql.contains(&n)));
    for (key, (_, at)) in &table.options {
        let what = format!("option '{key}' of table `{name}`");
        let spec_key = match connector {
            _ if key == "connector" => {
                positions.insert(format!("{node}.connector"), *at, what);
                continue;
            }
            Some(c) if takes_s3(c.spec) && key.starts_with("s3.") => "s3".to_owned(),
            Some(c) => {
                let role_options = match role {
                    Role::Read => c.read,
                    Role::Write => c.write,
                };
                let mapped = role_options
                    .unwrap_or_default()
                    .iter()
                    .chain(c.common)
                    .find(|(k, _, _)| k == key)
                    .map(|(_, spec, _)| (*spec).to_owned());
                let prefixed = || {
                    c.prefix_maps
                        .iter()
                        .find(|(p, _)| key.starts_with(p))
                        .map(|(_, spec)| (*spec).to_owned())
                };
                match mapped.or_else(prefixed) {
                    Some(spec) => spec,
                    None => key.clone(),
                }
            }
            None => continue,
        };
        positions.insert(format!("{node}.options.{spec_key}"), *at, what);
    }
    if let Some((columns, at)) = &table.partitioned_by {
        positions.insert(
            format!("{node}.options.partition_by"),
            *at,
            format!("PARTITIONED BY of table `{name}`"),
        );
        for (i, (column, at)) in columns.iter().enumerate() {
            positions.insert(
                format!("{node}.options.partition_by[{i}]"),
                *at,
                format!("partition column `{column}` of table `{name}`"),
            );
        }
    }
    if let Some(w) = &table.watermark {
        positions.insert(
            format!("{node}.watermark"),
            w.position,
            format!("the WATERMARK of table `{name}`"),
        );
    }
    for (i, (column, _, at)) in table.computed.iter().enumerate() {
        positions.insert(
            format!("{node}.computed[{i}]"),
            *at,
            format!("computed column `{column}` of table `{name}`"),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::SqlCompiler;

    async fn spec(script: &str) -> serde_json::Value {
        let job = SqlCompiler::new()
            .compile(script, "p.sql")
            .await
            .expect("compiles");
        serde_json::to_value(&job.spec).expect("serializes")
    }

    #[tokio::test]
    async fn partitioned_by_reaches_the_connectors_that_take_it() {
        let spec = spec(
            "CREATE TABLE t (id BIGINT, dt STRING, h INT) PARTITIONED BY (dt, h) \
             WITH ('connector' = 'filesystem', 'path' = 'in', 'format' = 'csv');\n\
             CREATE TABLE o (id BIGINT, dt STRING, h INT) PARTITIONED BY (dt) \
             WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'json', \
             'sink.partition-commit.policy.kind' = 'success-file', \
             'sink.partition-commit.trigger' = 'partition-time', \
             'sink.partition-commit.delay' = '1 h', \
             'sink.partition-commit.success-file.name' = '_DONE', \
             'partition.time-extractor.timestamp-pattern' = '$dt 00:00:00', \
             'sink.max-open-partitions' = '8');\n\
             CREATE TABLE d (id BIGINT, dt STRING) PARTITIONED BY (dt) \
             WITH ('connector' = 'delta', 'path' = 'delta');\n\
             CREATE TABLE e (id BIGINT, dt STRING) PARTITIONED BY (dt) \
             WITH ('connector' = 'delta', 'path' = 'delta2');\n\
             CREATE TABLE b (id BIGINT, dt STRING) WITH ('connector' = 'blackhole');\n\
             INSERT INTO o SELECT id, dt, h FROM t WHERE dt = 'x' AND id > 3;\n\
             INSERT INTO d SELECT id, dt FROM t WHERE dt = 'x' AND id > 3;\n\
             INSERT INTO b SELECT id, dt FROM e;",
        )
        .await;
        let source = &spec["sources"][0];
        assert_eq!(
            source["options"]["partition_by"],
            serde_json::json!(["dt", "h"])
        );
        // A CSV table prunes by its partition columns only.
        assert_eq!(
            source["prune"],
            serde_json::json!([{ "column": "dt", "op": "=", "value": "x" }])
        );
        let sink = &spec["sinks"][0]["options"];
        assert_eq!(sink["partition_by"], serde_json::json!(["dt"]));
        assert_eq!(sink["partition_commit_policy"], "success-file");
        assert_eq!(sink["partition_commit_trigger"], "partition-time");
        assert_eq!(sink["partition_commit_delay"], "1 h");
        assert_eq!(sink["partition_success_file_name"], "_DONE");
        assert_eq!(sink["partition_time_pattern"], "$dt 00:00:00");
        assert_eq!(sink["max_open_partitions"], 8);
        // Delta: the sink takes the columns, the source reads them from the table's log.
        assert!(spec["sources"][1]["options"].get("partition_by").is_none());
        assert_eq!(
            spec["sinks"][1]["options"]["partition_by"],
            serde_json::json!(["dt"])
        );
    }
}
