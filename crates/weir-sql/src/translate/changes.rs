//! Which streams update, and where updating streams may go: the changelog mode of every
//! translated stream ([`Changes`], as Flink infers it per node), the construct that made a
//! stream update (for errors), the tables whose rows are changes (an `upsert-kafka` table read
//! through an `upsert_normalize`, a Debezium topic), and the check that an upsert table gets
//! results unique by its primary key.

use super::{Stream, Translator};
use crate::error::Result;

/// What a stream's rows are, as Flink's changelog modes: inserts only, or changes (`+I`, `-U`,
/// `+U`, `-D`, in the physical row kind column) of results that update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Changes {
    /// Every row is final: an insert.
    InsertOnly,
    /// The rows insert, retract and replace results.
    Updating {
        /// The physical columns no two current results share (the group keys), as far as they
        /// survived the projections since; `None` when they did not.
        key: Option<Vec<String>>,
        /// The keyword and name of the construct whose results update, for errors.
        since: Since,
    },
}

/// The construct whose results update, for errors: the word to point at and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Since {
    pub(super) word: String,
    pub(super) what: String,
}

impl Since {
    pub(super) fn new(word: &str, what: &str) -> Self {
        Self {
            word: word.to_owned(),
            what: what.to_owned(),
        }
    }
}

impl Changes {
    pub(super) fn is_updating(&self) -> bool {
        matches!(self, Changes::Updating { .. })
    }

    /// The same changes after a projection that renames columns (`None`: dropped).
    pub(super) fn renamed(&self, rename: impl Fn(&str) -> Option<String>) -> Self {
        match self {
            Changes::InsertOnly => Changes::InsertOnly,
            Changes::Updating { key, since } => Changes::Updating {
                key: key
                    .as_ref()
                    .and_then(|k| k.iter().map(|c| rename(c)).collect()),
                since: since.clone(),
            },
        }
    }
}

impl Translator<'_> {
    /// Adds the `state_ttl` of `SET 'table.exec.state.ttl'` to an updating operator's options.
    pub(super) fn add_state_ttl(&self, options: &mut serde_json::Value) {
        if let Some(ttl) = self.settings.state_ttl {
            options["state_ttl"] = serde_json::json!(ttl.0);
        }
    }

    /// Adds the `buffer_bytes` of `SET 'state.buffer-size'` to the options of an operator
    /// that holds rows in memory before writing them to keyed state.
    pub(super) fn add_buffer_bytes(&self, options: &mut serde_json::Value) {
        if let Some(bytes) = self.settings.buffer_bytes {
            options["buffer_bytes"] = serde_json::json!(bytes);
        }
    }

    /// An updating stream written to a table with a PRIMARY KEY (upsert-kafka) must be unique
    /// by that key: the sink keeps only each key's latest row, so an update-before it leaves
    /// out has to belong to the same key as the update-after that follows.
    pub(super) fn check_upsert_key(&self, table: &str, input: &Stream) -> Result<()> {
        let (Some(primary), Changes::Updating { key, since }) =
            (self.job.primary_key(table), &input.changes)
        else {
            return Ok(());
        };
        let sink_columns = self.job.sink_columns(table, self.here())?;
        // The stream's key columns under the table's names (INSERT maps by position).
        let renamed: Option<Vec<String>> = key.as_ref().and_then(|k| {
            k.iter()
                .map(|c| {
                    let i = input.columns.iter().position(|x| x == c)?;
                    sink_columns.get(i).cloned()
                })
                .collect()
        });
        let mut want = primary.clone();
        want.sort();
        let same = renamed.is_some_and(|mut k| {
            k.sort();
            k == want
        });
        if same {
            return Ok(());
        }
        Err(self.unsupported_at(
            &since.word,
            &format!("INSERT INTO {table} of results not keyed by its PRIMARY KEY"),
            &format!(
                "`{table}` keeps one row per PRIMARY KEY ({}), but the results of {} are not \
                 unique by it; group by the key columns, or write to a table keyed like the \
                 results",
                primary.join(", "),
                since.what
            ),
        ))
    }

    /// The rows of table `table`'s source `node` and what they are: an upsert table's through
    /// an `upsert_normalize` keyed by its primary key, so that every update retracts the row
    /// it replaces.
    pub(super) fn table_changes(&mut self, table: &str, node: String) -> Result<(String, Changes)> {
        Ok(match self.job.table_changes(table) {
            None => (node, Changes::InsertOnly),
            Some(crate::job_builder::TableChanges::Upsert(key)) => {
                self.job.reads(table, key.iter().cloned());
                let name = self.next_name(&format!("{table}_normalize"));
                let mut options = serde_json::json!({ "keys": key });
                self.add_state_ttl(&mut options);
                self.job
                    .operator(&name, "upsert_normalize", &node, Some(key.clone()), options);
                let since = Since::new(table, &format!("the upsert-kafka table `{table}`"));
                (
                    name,
                    Changes::Updating {
                        key: Some(key),
                        since,
                    },
                )
            }
            Some(crate::job_builder::TableChanges::Debezium(key)) => {
                let since = Since::new(table, &format!("the debezium-json table `{table}`"));
                (node, Changes::Updating { key, since })
            }
        })
    }
}
