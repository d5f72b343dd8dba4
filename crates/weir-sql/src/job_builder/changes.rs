//! Tables whose rows update or that take updates: a `PRIMARY KEY` (required by `upsert-kafka`,
//! allowed on Debezium topics, refused elsewhere), the changelog formats of the file sink, and
//! what the SQL translator asks of a table about changes.

use super::{JobBuilder, Role, connector_options, option};
use crate::ddl::TableDef;
use crate::error::{Here, Result};

/// A table's changelog value format (`debezium-json`), if it has one.
pub(super) fn changelog_format(table: &TableDef) -> Option<&str> {
    option(table, "value.format")
        .or_else(|| option(table, "format"))
        .filter(|f| *f == "debezium-json")
}

/// How a table's rows update, when they do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TableChanges {
    /// An `upsert-kafka` table: each message its primary key's latest row.
    Upsert(Vec<String>),
    /// A Debezium topic: change events, with the primary key if one is declared.
    Debezium(Option<Vec<String>>),
}

/// The connector options `table` gets from its key and its changelog format, added to `out`:
/// an `upsert-kafka` table's `key.fields` from its PRIMARY KEY, a file sink's `envelope`.
///
/// # Errors
/// A PRIMARY KEY missing (upsert-kafka) or where rows do not update, or a changelog file read.
pub(super) fn changelog_options(
    table: &TableDef,
    spec: &str,
    role: Role,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    match (&table.primary_key, spec, changelog_format(table)) {
        (Some((key, _)), "upsert-kafka", _) => {
            out.insert("key.fields".to_owned(), serde_json::json!(key.join(";")));
        }
        (None, "upsert-kafka", _) => {
            return Err(table.here.invalid(format!(
                "table `{}`: an upsert-kafka table needs a PRIMARY KEY (...) NOT ENFORCED, the \
                 columns its messages are keyed by",
                table.name
            )));
        }
        (Some(_), "kafka", Some(_)) | (None, _, _) => {}
        (Some((_, at)), _, _) => {
            return Err(table.here.at(*at).invalid(format!(
                "table `{}`: a PRIMARY KEY is for tables whose rows update ('upsert-kafka', or \
                 'kafka' with 'debezium-json'); remove it",
                table.name
            )));
        }
    }
    if spec == "file"
        && let Some(format) = out.get("format").and_then(|f| f.as_str())
        && let Some(envelope) = match format {
            "debezium-json" => Some("debezium"),
            "changelog-json" => Some("changelog"),
            _ => None,
        }
    {
        if role == Role::Read {
            return Err(table.here.invalid(format!(
                "table `{}`: reading '{format}' files is not supported; a filesystem table in \
                 a changelog format can only be written",
                table.name
            )));
        }
        out.insert("format".to_owned(), serde_json::json!("json"));
        out.insert("envelope".to_owned(), serde_json::json!(envelope));
    }
    Ok(())
}

impl JobBuilder {
    /// How the rows of table `table` update, `None` when they are inserts.
    pub(crate) fn table_changes(&self, table: &str) -> Option<TableChanges> {
        let def = &self.tables.get(table)?.def;
        let key = def.primary_key.as_ref().map(|(k, _)| k.clone());
        match option(def, "connector") {
            Some("upsert-kafka") => Some(TableChanges::Upsert(key.unwrap_or_default())),
            Some("kafka") if changelog_format(def).is_some() => Some(TableChanges::Debezium(key)),
            _ => None,
        }
    }

    /// The PRIMARY KEY of table `table`, if it declares one.
    pub(crate) fn primary_key(&self, table: &str) -> Option<Vec<String>> {
        let def = &self.tables.get(table)?.def;
        def.primary_key.as_ref().map(|(k, _)| k.clone())
    }

    /// `None` when table `table` can be written updating results (a changelog format, a
    /// blackhole); otherwise what its sink is, for the error that refuses them.
    pub(crate) fn inserts_only(&self, table: &str, here: &Here) -> Result<Option<String>> {
        let t = self
            .tables
            .get(table)
            .ok_or_else(|| here.invalid(format!("no table `{table}`")))?;
        let (connector, options) = connector_options(&t.def, Role::Write)?;
        let takes_changes = match connector {
            "blackhole" | "upsert-kafka" => true,
            "file" => options.get("envelope").is_some(),
            "kafka" => changelog_format(&t.def).is_some(),
            _ => false,
        };
        if takes_changes {
            return Ok(None);
        }
        let format = option(&t.def, "format")
            .or_else(|| option(&t.def, "value.format"))
            .unwrap_or("none");
        Ok(Some(format!(
            "connector '{}', format '{format}'",
            option(&t.def, "connector").unwrap_or(connector)
        )))
    }
}
