//! `CREATE TABLE` (Flink style: computed columns, `WATERMARK FOR`, `PARTITIONED BY`, `WITH`
//! options) and `SET`.
//!
//! DataFusion's parser does not know computed columns or watermarks, so these statements are
//! parsed here with sqlparser's building blocks (`parse_identifier`, `parse_data_type`,
//! `parse_expr`) over the statement's tokens, keeping positions.

use crate::error::{Here, Position, Result};
use crate::script::{Statement, position};
use arrow::datatypes::DataType;
use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, DataType as SqlType, Expr as SqlExpr, Ident, TimezoneInfo, Value,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};
use std::collections::BTreeMap;
use weir_api::DurationMs;

/// A physical column of a table.
#[derive(Debug, Clone)]
pub(crate) struct ColumnDef {
    pub(crate) name: String,
    /// The type as the job spec writes it (`int64`, `timestamp(ms)`, ...).
    pub(crate) type_name: String,
    pub(crate) data_type: DataType,
    pub(crate) nullable: bool,
    /// `METADATA [FROM 'key'] [VIRTUAL]`: the column holds connector metadata (Kafka's
    /// `timestamp`, `partition`, ...) rather than a field of the record.
    pub(crate) metadata: Option<MetadataColumn>,
}

/// A metadata column's key and whether it is read-only (`VIRTUAL`: not written by an INSERT).
#[derive(Debug, Clone)]
pub(crate) struct MetadataColumn {
    pub(crate) key: String,
    pub(crate) is_virtual: bool,
}

/// `WATERMARK FOR column AS column - INTERVAL ...`.
#[derive(Debug, Clone)]
pub(crate) struct WatermarkDef {
    pub(crate) column: String,
    /// The delay `d` of `column - INTERVAL d`: Flink's watermark is `max - d`.
    pub(crate) delay_ms: u64,
    pub(crate) position: Position,
}

/// A table declared with `CREATE TABLE`.
#[derive(Debug, Clone)]
pub(crate) struct TableDef {
    pub(crate) name: String,
    pub(crate) here: Here,
    pub(crate) columns: Vec<ColumnDef>,
    /// Computed columns: name and SQL expression text, in declaration order.
    pub(crate) computed: Vec<(String, String, Position)>,
    pub(crate) watermark: Option<WatermarkDef>,
    /// `PRIMARY KEY (...) NOT ENFORCED`: the key columns and where the clause is.
    pub(crate) primary_key: Option<(Vec<String>, Position)>,
    /// `PARTITIONED BY (column, ...)`: the columns with their positions, and where the clause
    /// is.
    pub(crate) partitioned_by: Option<(Vec<(String, Position)>, Position)>,
    /// `WITH` options: key -> (value, position of the key).
    pub(crate) options: BTreeMap<String, (String, Position)>,
}

/// Normalizes an identifier like DataFusion: lower case unless quoted.
pub(crate) fn normalize(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

fn parser_error(here: &Here, e: ParserError) -> crate::error::SqlError {
    // sqlparser's messages end with " at Line: l, Column: c" for the tokens we gave it, which
    // carry their positions in the file.
    let text = e.to_string();
    let text = text.strip_prefix("sql parser error: ").unwrap_or(&text);
    let position = locate(text).unwrap_or(here.position);
    here.at(position).syntax(strip_location(text))
}

/// The `Line: l, Column: c` a sqlparser message ends with.
pub(crate) fn locate(message: &str) -> Option<Position> {
    let at = message.rfind("Line: ")?;
    let rest = &message[at + 6..];
    let (line, rest) = rest.split_once(", Column: ")?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(Position {
        line: line.trim().parse().ok()?,
        column: column.parse().ok()?,
    })
}

/// The message without its trailing ` at Line: l, Column: c`.
pub(crate) fn strip_location(message: &str) -> String {
    match message.rfind(" at Line: ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// The spec type name of a SQL column type.
fn type_name(data_type: &SqlType) -> std::result::Result<String, String> {
    let unit = |precision: Option<u64>| match precision {
        None | Some(1..=3) => Ok("ms"),
        Some(0) => Ok("s"),
        Some(4..=6) => Ok("us"),
        Some(7..=9) => Ok("ns"),
        Some(p) => Err(format!("timestamp precision {p} is not supported (0..=9)")),
    };
    Ok(match data_type {
        SqlType::Timestamp(precision, tz) => {
            let unit = unit(*precision)?;
            match tz {
                TimezoneInfo::WithTimeZone | TimezoneInfo::Tz => {
                    format!("timestamp({unit}, UTC)")
                }
                _ => format!("timestamp({unit})"),
            }
        }
        SqlType::Custom(name, args) if name.to_string().eq_ignore_ascii_case("timestamp_ltz") => {
            let precision = args.first().and_then(|a| a.parse().ok());
            format!("timestamp({}, UTC)", unit(precision)?)
        }
        SqlType::Decimal(info) | SqlType::Numeric(info) | SqlType::Dec(info) => match info {
            ast::ExactNumberInfo::PrecisionAndScale(p, s) => format!("decimal({p}, {s})"),
            ast::ExactNumberInfo::Precision(p) => format!("decimal({p}, 0)"),
            ast::ExactNumberInfo::None => "decimal(10, 0)".to_owned(),
        },
        SqlType::Varchar(_)
        | SqlType::Char(_)
        | SqlType::Character(_)
        | SqlType::CharVarying(_)
        | SqlType::Text
        | SqlType::String(_) => "string".to_owned(),
        SqlType::Double(_) | SqlType::DoublePrecision => "float64".to_owned(),
        other => {
            let text = other.to_string();
            // `STRING` and other names the spec knows (BIGINT, INT, FLOAT, BOOLEAN, DATE, ...).
            weir_plan::parse_type_name(&text).map_err(|_| {
                format!(
                    "type {text} is not supported; use BIGINT, INT, SMALLINT, TINYINT, DOUBLE, \
                     FLOAT, BOOLEAN, STRING, DATE, DECIMAL(p, s), TIMESTAMP(p) or TIMESTAMP_LTZ(p)"
                )
            })?;
            text.to_lowercase()
        }
    })
}

/// Milliseconds of an `INTERVAL '5' SECOND` / `INTERVAL '5 seconds'` literal.
pub(crate) fn sql_interval_ms(interval: &ast::Interval) -> Option<u64> {
    let text = match interval.value.as_ref() {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::Number(s, _) => s.clone(),
            _ => return None,
        },
        _ => return None,
    };
    let unit = interval.leading_field.as_ref().map(ToString::to_string);
    interval_text_ms(&text, unit.as_deref())
}

/// Milliseconds of `amount [unit]` with the unit given separately or inside the text, read by
/// the one duration parser that job specs and `SET` use too.
pub(crate) fn interval_text_ms(text: &str, unit: Option<&str>) -> Option<u64> {
    match unit {
        Some(unit) => DurationMs::parse_amount(text, unit),
        None => DurationMs::parse(text),
    }
    .ok()
    .map(|d| d.0)
}

fn watermark_delay(column: &str, expr: &SqlExpr) -> std::result::Result<u64, String> {
    let is_column = |e: &SqlExpr| matches!(e, SqlExpr::Identifier(i) if normalize(i) == column);
    let shape = || {
        format!(
            "a watermark is `{column}` or `{column} - INTERVAL 'n' UNIT` (bounded \
             out-of-orderness), got `{expr}`"
        )
    };
    if is_column(expr) {
        return Ok(0);
    }
    match expr {
        SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::Minus,
            right,
        } if is_column(left) => match right.as_ref() {
            SqlExpr::Interval(interval) => sql_interval_ms(interval).ok_or_else(|| {
                format!("cannot read the interval `{interval}` as whole milliseconds")
            }),
            _ => Err(shape()),
        },
        _ => Err(shape()),
    }
}

/// Parses `CREATE TABLE name (...) WITH (...)`.
pub(crate) fn parse_create_table(stmt: &Statement) -> Result<TableDef> {
    let here = &stmt.here;
    let dialect = GenericDialect {};
    let mut p = Parser::new(&dialect).with_tokens_with_locations(stmt.tokens.clone());
    let mut table = parse_table_name(&mut p, here)?;
    parse_table_elements(&mut p, here, &mut table)?;
    check_table_elements(&table, here)?;
    parse_partitioned_by(&mut p, here, &mut table)?;
    parse_with_options(&mut p, here, &mut table)?;
    let rest = p.peek_token();
    if rest.token != Token::EOF {
        return Err(here.at(position(&rest)).syntax(format!(
            "unexpected `{}` after the table definition",
            rest.token
        )));
    }
    Ok(table)
}

/// `CREATE TABLE [IF NOT EXISTS] name`: an empty table of that name, placed at the name so
/// that errors about the whole table point there.
fn parse_table_name(p: &mut Parser<'_>, here: &Here) -> Result<TableDef> {
    let e = |err| parser_error(here, err);
    p.expect_keyword(Keyword::CREATE).map_err(e)?;
    p.expect_keyword(Keyword::TABLE).map_err(e)?;
    let _ = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name_token = p.peek_token();
    let name = p.parse_identifier().map_err(e)?;
    let name = normalize(&name);
    Ok(TableDef {
        name,
        here: here.at(position(&name_token)),
        columns: Vec::new(),
        computed: Vec::new(),
        watermark: None,
        primary_key: None,
        partitioned_by: None,
        options: BTreeMap::new(),
    })
}

/// `(element, ...)`: each column, computed column, `WATERMARK` and `PRIMARY KEY` into `table`,
/// in the order written (a column declared twice is refused where it is declared again).
fn parse_table_elements(p: &mut Parser<'_>, here: &Here, table: &mut TableDef) -> Result<()> {
    let e = |err| parser_error(here, err);
    p.expect_token(&Token::LParen).map_err(e)?;
    loop {
        let start = p.peek_token();
        let is_watermark = matches!(
            &start.token,
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("WATERMARK")
        );
        if is_watermark {
            p.next_token();
            parse_watermark(p, here, &start, table)?;
        } else if p.parse_keyword(Keyword::PRIMARY) {
            parse_primary_key(p, here, &start, table)?;
        } else {
            parse_column(p, here, &start, table)?;
        }
        if p.consume_token(&Token::RParen) {
            break;
        }
        p.expect_token(&Token::Comma).map_err(e)?;
    }
    Ok(())
}

/// `FOR column AS column [- INTERVAL ...]` after `WATERMARK` (at `start`): the table's one
/// watermark, its delay read from the expression.
fn parse_watermark(
    p: &mut Parser<'_>,
    here: &Here,
    start: &TokenWithSpan,
    table: &mut TableDef,
) -> Result<()> {
    let e = |err| parser_error(here, err);
    p.expect_keyword(Keyword::FOR).map_err(e)?;
    let column = normalize(&p.parse_identifier().map_err(e)?);
    p.expect_keyword(Keyword::AS).map_err(e)?;
    let expr_token = p.peek_token();
    let expr = p.parse_expr().map_err(e)?;
    let delay_ms =
        watermark_delay(&column, &expr).map_err(|m| here.at(position(&expr_token)).invalid(m))?;
    if table.watermark.is_some() {
        return Err(here
            .at(position(start))
            .invalid("a table has at most one WATERMARK"));
    }
    table.watermark = Some(WatermarkDef {
        column,
        delay_ms,
        position: position(start),
    });
    Ok(())
}

/// `KEY (column, ...) NOT ENFORCED` after `PRIMARY` (at `start`): the table's one primary key;
/// `NOT ENFORCED` is required, as in Flink, since Weir does not check it.
fn parse_primary_key(
    p: &mut Parser<'_>,
    here: &Here,
    start: &TokenWithSpan,
    table: &mut TableDef,
) -> Result<()> {
    let e = |err| parser_error(here, err);
    p.expect_keyword(Keyword::KEY).map_err(e)?;
    p.expect_token(&Token::LParen).map_err(e)?;
    let mut columns = Vec::new();
    loop {
        columns.push(normalize(&p.parse_identifier().map_err(e)?));
        if p.consume_token(&Token::RParen) {
            break;
        }
        p.expect_token(&Token::Comma).map_err(e)?;
    }
    if !p.parse_keywords(&[Keyword::NOT, Keyword::ENFORCED]) {
        return Err(here.at(position(start)).invalid(
            "a PRIMARY KEY is declared NOT ENFORCED, as in Flink: Weir does not check \
             that the rows' keys are unique",
        ));
    }
    if table.primary_key.is_some() {
        return Err(here
            .at(position(start))
            .invalid("a table has at most one PRIMARY KEY"));
    }
    table.primary_key = Some((columns, position(start)));
    Ok(())
}

/// `name AS expr` (a computed column) or `name TYPE [NOT NULL] [METADATA ...]` (a physical
/// one), starting at `start`; a name already declared is refused there.
fn parse_column(
    p: &mut Parser<'_>,
    here: &Here,
    start: &TokenWithSpan,
    table: &mut TableDef,
) -> Result<()> {
    let e = |err| parser_error(here, err);
    let column = normalize(&p.parse_identifier().map_err(e)?);
    let at = here.at(position(start));
    if table.columns.iter().any(|c| c.name == column)
        || table.computed.iter().any(|c| c.0 == column)
    {
        return Err(at.invalid(format!("column `{column}` is declared twice")));
    }
    if p.parse_keyword(Keyword::AS) {
        let expr = p.parse_expr().map_err(e)?;
        table
            .computed
            .push((column, expr.to_string(), position(start)));
        return Ok(());
    }
    let sql_type = p.parse_data_type().map_err(e)?;
    let type_name =
        type_name(&sql_type).map_err(|m| at.invalid(format!("column `{column}`: {m}")))?;
    let data_type = weir_plan::parse_type_name(&type_name)
        .map_err(|m| at.invalid(format!("column `{column}`: {m}")))?;
    let nullable = !p.parse_keywords(&[Keyword::NOT, Keyword::NULL]);
    let _ = p.parse_keyword(Keyword::NULL);
    let metadata = parse_metadata(p, here, &column)?;
    table.columns.push(ColumnDef {
        name: column,
        type_name,
        data_type,
        nullable,
        metadata,
    });
    Ok(())
}

/// `METADATA [FROM 'key'] [VIRTUAL]` after a physical column's type, if it is there; the key
/// is the column's name unless `FROM` gives one.
fn parse_metadata(p: &mut Parser<'_>, here: &Here, column: &str) -> Result<Option<MetadataColumn>> {
    if !next_word_is(p, "METADATA") {
        return Ok(None);
    }
    let key = if p.parse_keyword(Keyword::FROM) {
        p.parse_literal_string()
            .map_err(|err| parser_error(here, err))?
    } else {
        column.to_owned()
    };
    let is_virtual = next_word_is(p, "VIRTUAL");
    Ok(Some(MetadataColumn { key, is_virtual }))
}

/// Checks what needs every element read: a physical column exists, the primary key names
/// physical columns, the watermark's column exists.
fn check_table_elements(table: &TableDef, here: &Here) -> Result<()> {
    if table.columns.is_empty() {
        return Err(table.here.invalid(format!(
            "table `{}` declares no physical column",
            table.name
        )));
    }
    if let Some((columns, at)) = &table.primary_key
        && let Some(missing) = columns.iter().find(|k| {
            !table
                .columns
                .iter()
                .any(|c| c.name == **k && c.metadata.is_none())
        })
    {
        return Err(here.at(*at).invalid(format!(
            "PRIMARY KEY ({missing}): no such physical column in `{}`",
            table.name
        )));
    }
    if let Some(w) = &table.watermark {
        let known = table.columns.iter().any(|c| c.name == w.column)
            || table.computed.iter().any(|c| c.0 == w.column);
        if !known {
            return Err(here.at(w.position).invalid(format!(
                "WATERMARK FOR `{}`: no such column in `{}`",
                w.column, table.name
            )));
        }
    }
    Ok(())
}

/// `PARTITIONED BY (column, ...)`, if it is there (Flink's clause): each column must be a
/// physical column of the table, named once; refused at the column otherwise.
fn parse_partitioned_by(p: &mut Parser<'_>, here: &Here, table: &mut TableDef) -> Result<()> {
    let start = p.peek_token();
    if !p.parse_keyword(Keyword::PARTITIONED) {
        return Ok(());
    }
    let e = |err| parser_error(here, err);
    p.expect_keyword(Keyword::BY).map_err(e)?;
    p.expect_token(&Token::LParen).map_err(e)?;
    let mut columns: Vec<(String, Position)> = Vec::new();
    loop {
        let token = p.peek_token();
        let column = normalize(&p.parse_identifier().map_err(e)?);
        let at = here.at(position(&token));
        if columns.iter().any(|(c, _)| *c == column) {
            return Err(at.invalid(format!("PARTITIONED BY names column `{column}` twice")));
        }
        if !table
            .columns
            .iter()
            .any(|c| c.name == column && c.metadata.is_none())
        {
            let computed = table.computed.iter().any(|c| c.0 == column);
            return Err(at.invalid(format!(
                "PARTITIONED BY ({column}): {} `{}`",
                if computed {
                    "a partition column is a physical column, not a computed one, in"
                } else {
                    "no such physical column in"
                },
                table.name
            )));
        }
        columns.push((column, position(&token)));
        if p.consume_token(&Token::RParen) {
            break;
        }
        p.expect_token(&Token::Comma).map_err(e)?;
    }
    table.partitioned_by = Some((columns, position(&start)));
    Ok(())
}

/// `WITH ('key' = 'value', ...)`, if it is there: the options with their keys' positions; a
/// key given twice is refused where it is given again.
fn parse_with_options(p: &mut Parser<'_>, here: &Here, table: &mut TableDef) -> Result<()> {
    if !p.parse_keyword(Keyword::WITH) {
        return Ok(());
    }
    let e = |err| parser_error(here, err);
    p.expect_token(&Token::LParen).map_err(e)?;
    loop {
        let key_token = p.peek_token();
        let key = p.parse_literal_string().map_err(e)?;
        p.expect_token(&Token::Eq).map_err(e)?;
        let value = p.parse_literal_string().map_err(e)?;
        let key_at = position(&key_token);
        if table.options.insert(key.clone(), (value, key_at)).is_some() {
            return Err(here
                .at(key_at)
                .invalid(format!("option '{key}' is given twice")));
        }
        if p.consume_token(&Token::RParen) {
            break;
        }
        p.expect_token(&Token::Comma).map_err(e)?;
    }
    Ok(())
}

/// Consumes the next token when it is the unquoted word `word` (any case).
fn next_word_is(p: &mut Parser<'_>, word: &str) -> bool {
    let is = matches!(
        &p.peek_token().token,
        Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word)
    );
    if is {
        p.next_token();
    }
    is
}

/// Parses `SET 'key' = 'value'` (quotes optional); returns the key, value and positions.
pub(crate) fn parse_set(stmt: &Statement) -> Result<(String, String, Position)> {
    let tokens: Vec<_> = stmt.significant().collect();
    let text = |t: &Token| match t {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Some(s.clone()),
        Token::Word(w) => Some(w.value.clone()),
        Token::Number(n, _) => Some(n.clone()),
        _ => None,
    };
    let eq = tokens.iter().position(|t| t.token == Token::Eq);
    let bad = || {
        stmt.here
            .syntax("expected `SET 'key' = 'value'`, e.g. SET 'parallelism' = '4'")
    };
    let eq = eq.ok_or_else(bad)?;
    // The key may be written unquoted with dots: SET parallelism = 4, SET late.policy = route.
    let key: Option<String> = tokens[1..eq]
        .iter()
        .map(|t| match &t.token {
            Token::Period => Some(".".to_owned()),
            other => text(other),
        })
        .collect();
    let value: Option<String> = tokens[eq + 1..]
        .iter()
        .map(|t| match &t.token {
            Token::Period => Some(".".to_owned()),
            other => text(other),
        })
        .collect();
    match (key, value) {
        (Some(k), Some(v)) if !k.is_empty() && !v.is_empty() => Ok((
            k,
            v,
            tokens.get(1).map_or(stmt.here.position, |t| position(t)),
        )),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::split;

    fn table(sql: &str) -> Result<TableDef> {
        parse_create_table(&split(sql, "t.sql").unwrap()[0])
    }

    #[test]
    fn parses_flink_style_tables() {
        let t = table(
            "CREATE TABLE Bids (\n  auction BIGINT NOT NULL,\n  price DOUBLE,\n  date_time BIGINT,\n  \
             ts AS TO_TIMESTAMP_MILLIS(date_time),\n  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND\n) \
             WITH ('connector' = 'filesystem', 'path' = 'in/*.csv', 'format' = 'csv')",
        )
        .unwrap();
        assert_eq!(t.name, "bids");
        assert_eq!(t.columns.len(), 3);
        assert!(!t.columns[0].nullable);
        assert_eq!(t.columns[1].data_type, DataType::Float64);
        assert_eq!(t.computed[0].0, "ts");
        assert_eq!(t.computed[0].1, "TO_TIMESTAMP_MILLIS(date_time)");
        let w = t.watermark.unwrap();
        assert_eq!((w.column.as_str(), w.delay_ms), ("ts", 5000));
        assert_eq!(t.options["path"].0, "in/*.csv");
    }

    #[test]
    fn intervals_and_types() {
        assert_eq!(interval_text_ms("5", Some("SECOND")), Some(5000));
        assert_eq!(interval_text_ms("0.001", Some("SECOND")), Some(1));
        assert_eq!(interval_text_ms("10 minutes", None), Some(600_000));
        assert_eq!(interval_text_ms("1.5", Some("MILLISECOND")), None);
        let t = table("CREATE TABLE t (a TIMESTAMP(3), b TIMESTAMP_LTZ(6), c DECIMAL(10, 2), d STRING, e INT)")
            .unwrap();
        let names: Vec<&str> = t.columns.iter().map(|c| c.type_name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "timestamp(ms)",
                "timestamp(us, UTC)",
                "decimal(10, 2)",
                "string",
                "int"
            ]
        );
    }

    #[test]
    fn errors_point_into_the_script() {
        let err = table("CREATE TABLE t (\n  a BIGINT,\n  a INT\n)")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.sql:3:3:"), "{err}");
        let err = table("CREATE TABLE t (\n  a BIGINT,\n  WATERMARK FOR a AS a * 2\n)")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.sql:3:22:") && err.contains("INTERVAL"),
            "{err}"
        );
        let err = table("CREATE TABLE t (a BIGINT) WITH ('k' 'v')")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.sql:1:37:") && err.contains("syntax"),
            "{err}"
        );
        let err = table("CREATE TABLE t (a WIBBLE)").unwrap_err().to_string();
        assert!(err.contains("WIBBLE"), "{err}");
    }

    #[test]
    fn partitioned_by_names_physical_columns() {
        let t = table(
            "CREATE TABLE t (a BIGINT, dt STRING, `hour` INT) PARTITIONED BY (dt, `hour`) \
             WITH ('connector' = 'filesystem')",
        )
        .unwrap();
        let (columns, at) = t.partitioned_by.unwrap();
        let names: Vec<&str> = columns.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(names, ["dt", "hour"]);
        assert_eq!((at.line, at.column), (1, 50));
        let err = table("CREATE TABLE t (a BIGINT,\n  dt STRING)\nPARTITIONED BY (dt, day)")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.sql:3:21:") && err.contains("day"),
            "{err}"
        );
        let err = table("CREATE TABLE t (a BIGINT) PARTITIONED BY (a, a)")
            .unwrap_err()
            .to_string();
        assert!(err.contains("twice"), "{err}");
    }

    #[test]
    fn set_statements() {
        let s = split("SET 'parallelism' = '4'; SET late.policy = update", "t.sql").unwrap();
        assert_eq!(parse_set(&s[0]).unwrap().0, "parallelism");
        let (k, v, _) = parse_set(&s[1]).unwrap();
        assert_eq!((k.as_str(), v.as_str()), ("late.policy", "update"));
    }
}
