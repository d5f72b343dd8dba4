//! Sequential reading of one object in large ranged blocks, into a window of unconsumed bytes.
//!
//! Ranged `get`s of a few megabytes keep memory bounded and suit every store: a local file
//! would otherwise be streamed in 8 KiB pieces, each a blocking-pool round trip. Consumed bytes
//! are dropped lazily, when the next block arrives, so each byte is moved at most once.

use crate::location::store_error;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use weir_api::Result;

/// Bytes read per request when nothing else is configured.
pub(crate) const DEFAULT_BLOCK_BYTES: usize = 4 * 1024 * 1024;

/// The UTF-8 byte order mark some tools put at the start of text files.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads an object front to back; [`Self::pending`] is what was read and not yet consumed.
#[derive(Debug)]
pub(crate) struct ObjectBytes {
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// The file's name in messages.
    input: String,
    size: u64,
    offset: u64,
    block: usize,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
}

impl ObjectBytes {
    /// Opens `path`, learning its size.
    ///
    /// # Errors
    /// External errors when the object cannot be found or read.
    pub(crate) async fn open(
        store: Arc<dyn ObjectStore>,
        path: Path,
        input: &str,
        block: usize,
    ) -> Result<Self> {
        let meta = store
            .head(&path)
            .await
            .map_err(|e| store_error(format!("opening `{input}`"), e))?;
        Ok(Self {
            store,
            path,
            input: input.to_owned(),
            size: meta.size,
            offset: 0,
            block: block.max(UTF8_BOM.len()),
            buf: Vec::new(),
            start: 0,
        })
    }

    /// The bytes read and not yet consumed.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Whether the whole object has been read (pending bytes may remain).
    pub(crate) fn eof(&self) -> bool {
        self.offset >= self.size
    }

    /// Drops the first `n` pending bytes.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
    }

    /// Appends the next block to the pending bytes; does nothing at the end of the object. A
    /// leading UTF-8 byte order mark is dropped.
    ///
    /// # Errors
    /// External errors when the store fails.
    pub(crate) async fn fill(&mut self) -> Result<()> {
        if self.eof() {
            return Ok(());
        }
        let end = self.size.min(self.offset + self.block as u64);
        let range = self.offset..end;
        let bytes = self
            .store
            .get_range(&self.path, range.clone())
            .await
            .map_err(|e| store_error(format!("reading `{}` at {range:?}", self.input), e))?;
        let bytes = match bytes.strip_prefix(UTF8_BOM) {
            Some(rest) if self.offset == 0 => rest,
            _ => &bytes[..],
        };
        self.offset = end;
        self.buf.drain(..self.start);
        self.start = 0;
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
}
