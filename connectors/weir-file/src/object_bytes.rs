//! Sequential reading of one object in large ranged blocks.
//!
//! Ranged `get`s of a few megabytes keep memory bounded and suit every store: a local file
//! would otherwise be streamed in 8 KiB pieces, each a blocking-pool round trip.

use crate::location::store_error;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use weir_api::Result;

/// Bytes read per request when nothing else is configured.
pub(crate) const DEFAULT_BLOCK_BYTES: usize = 4 * 1024 * 1024;

/// The UTF-8 byte order mark some tools put at the start of text files.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads an object front to back, one block at a time.
#[derive(Debug)]
pub(crate) struct ObjectBytes {
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// The file's name in messages.
    input: String,
    size: u64,
    offset: u64,
    block: usize,
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
        })
    }

    /// The next block, or `None` at the end; a leading UTF-8 byte order mark is dropped.
    ///
    /// # Errors
    /// External errors when the store fails.
    pub(crate) async fn next_block(&mut self) -> Result<Option<Bytes>> {
        if self.offset >= self.size {
            return Ok(None);
        }
        let end = self.size.min(self.offset + self.block as u64);
        let range = self.offset..end;
        let bytes = self
            .store
            .get_range(&self.path, range.clone())
            .await
            .map_err(|e| store_error(format!("reading `{}` at {range:?}", self.input), e))?;
        let first = self.offset == 0;
        self.offset = end;
        if first && bytes.starts_with(UTF8_BOM) {
            return Ok(Some(bytes.slice(UTF8_BOM.len()..)));
        }
        Ok(Some(bytes))
    }
}
