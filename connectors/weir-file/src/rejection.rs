//! What readers do with records they cannot turn into rows: fail, or collect dead letters.

use arrow::array::Array;
use arrow::record_batch::RecordBatch;
use weir_api::{BadRecordPolicy, DeadLetterBuilder, Error, RecordLocation, Result};

/// One record a reader rejected, with where it was and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    /// File, line and column.
    pub(crate) location: RecordLocation,
    /// Why the record was rejected.
    pub(crate) reason: String,
    /// The record's text, where the format has one.
    pub(crate) raw: Option<String>,
}

impl Rejection {
    /// A rejection of the record at `line` of `input`, about `column` where known.
    pub(crate) fn new(
        input: &str,
        line: Option<u64>,
        column: Option<&str>,
        reason: impl Into<String>,
        raw: Option<String>,
    ) -> Self {
        Self {
            location: RecordLocation {
                input: input.to_owned(),
                line,
                column: column.map(str::to_owned),
            },
            reason: reason.into(),
            raw,
        }
    }
}

/// Applies a [`BadRecordPolicy`] to the rejections of one batch.
#[derive(Debug)]
pub(crate) struct Rejections {
    policy: BadRecordPolicy,
    dead_letters: DeadLetterBuilder,
}

impl Rejections {
    /// Rejections handled by `policy`.
    pub(crate) fn new(policy: BadRecordPolicy) -> Self {
        Self {
            policy,
            dead_letters: DeadLetterBuilder::new(),
        }
    }

    /// Handles rejections in input order: the first fails the read under
    /// [`BadRecordPolicy::Fail`]; all become dead letters under [`BadRecordPolicy::DeadLetter`].
    ///
    /// # Errors
    /// [`Error::BadRecord`] for the first rejection under [`BadRecordPolicy::Fail`].
    pub(crate) fn reject_all(
        &mut self,
        rejections: impl IntoIterator<Item = Rejection>,
    ) -> Result<()> {
        for rejection in rejections {
            match self.policy {
                BadRecordPolicy::Fail => {
                    return Err(Error::BadRecord {
                        location: rejection.location,
                        message: rejection.reason,
                    });
                }
                BadRecordPolicy::DeadLetter => self.dead_letters.push(
                    &rejection.location,
                    &rejection.reason,
                    rejection.raw.as_deref(),
                ),
            }
        }
        Ok(())
    }

    /// The dead letters collected since the last call, if any.
    pub(crate) fn take(&mut self) -> Option<RecordBatch> {
        self.dead_letters.finish()
    }
}

/// The first non-nullable column of `batch` that holds a null, if any.
///
/// Decoders do not all enforce nullability, so readers check before trusting a fast-path batch.
pub(crate) fn null_in_non_nullable(batch: &RecordBatch) -> Option<usize> {
    batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .position(|(field, column)| !field.is_nullable() && column.null_count() > 0)
}

/// The text of `bytes` for messages and dead letters, without a trailing CR.
pub(crate) fn raw_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}
