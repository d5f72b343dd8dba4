//! Sequential reading of one object in large ranged blocks, into a window of unconsumed bytes.
//!
//! Ranged `get`s of a few megabytes keep memory bounded and suit every store: a local file
//! would otherwise be streamed in 8 KiB pieces, each a blocking-pool round trip. Consumed bytes
//! are dropped lazily, when the next block arrives, so each byte is moved at most once.

use crate::location::store_error;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use weir_api::{Result, SplitRange};

/// Bytes read per request when nothing else is configured.
pub(crate) const DEFAULT_BLOCK_BYTES: usize = 4 * 1024 * 1024;

/// The UTF-8 byte order mark some tools put at the start of text files.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads an object front to back, or one line-aligned byte range of it;
/// [`Self::pending`] is what was read and not yet consumed.
///
/// A range `[start, end)` of a text file is read as the bytes from the first line start at or
/// after `start` to the first line start at or after `end` (a line starts at 0 or after a line
/// feed). Consecutive ranges therefore cover a file exactly once, without overlap, whatever
/// their sizes; a range holding no line start is empty.
#[derive(Debug)]
pub(crate) struct ObjectBytes {
    store: Arc<dyn ObjectStore>,
    path: Path,
    /// The file's name in messages.
    input: String,
    /// The object's size.
    size: u64,
    /// Where reading stops: the object's size, or the end of the range once found.
    limit: u64,
    /// The range's nominal end, until the line start at or after it is found.
    seek_end: Option<u64>,
    /// Where this reader's first byte is in the object (0, or a range's first line start).
    begin: u64,
    offset: u64,
    block: usize,
    buf: Vec<u8>,
    /// Position of `buf[0]` in the object.
    buf_at: u64,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
    /// Line feeds before `begin`, once counted.
    lines_before: Option<u64>,
    /// The most unconsumed bytes [`Self::fill`] reads more after.
    max_pending: usize,
}

impl ObjectBytes {
    /// Opens `path`, learning its size, to read all of it.
    ///
    /// # Errors
    /// External errors when the object cannot be found or read.
    pub(crate) async fn open(
        store: Arc<dyn ObjectStore>,
        path: Path,
        input: &str,
        block: usize,
    ) -> Result<Self> {
        Self::open_range(store, path, input, block, None).await
    }

    /// Opens `path` to read the lines of `range` (all of it for `None`); see [`ObjectBytes`].
    ///
    /// # Errors
    /// External errors when the object cannot be found or read.
    pub(crate) async fn open_range(
        store: Arc<dyn ObjectStore>,
        path: Path,
        input: &str,
        block: usize,
        range: Option<SplitRange>,
    ) -> Result<Self> {
        let meta = store
            .head(&path)
            .await
            .map_err(|e| store_error(format!("opening `{input}`"), e))?;
        let mut bytes = Self {
            store,
            path,
            input: input.to_owned(),
            size: meta.size,
            limit: meta.size,
            seek_end: None,
            begin: 0,
            offset: 0,
            block: block.max(UTF8_BOM.len()),
            buf: Vec::new(),
            buf_at: 0,
            start: 0,
            lines_before: None,
            max_pending: usize::MAX,
        };
        if let Some(range) = range {
            bytes.seek_end = Some(range.end).filter(|&end| end < bytes.size);
            if range.start > 0 {
                bytes.align_start(range.start).await?;
            }
        }
        Ok(bytes)
    }

    /// Skips to the first line start at or after `start`; the range is empty when that is at
    /// or past its end.
    async fn align_start(&mut self, start: u64) -> Result<()> {
        self.offset = (start - 1).min(self.limit);
        self.buf_at = self.offset;
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.buf) {
                self.begin = self.buf_at + at as u64 + 1;
                self.start = at + 1;
                break;
            }
            if self.offset >= self.limit {
                self.begin = self.limit;
                self.start = self.buf.len();
                break;
            }
            self.buf_at += self.buf.len() as u64;
            self.buf.clear();
            self.read_block().await?;
        }
        // `end - 1` is at or before the line feed just found: the range ends where it begins.
        if self.seek_end.is_some_and(|end| self.begin >= end) {
            self.seek_end = None;
            self.truncate_at(self.begin);
        } else {
            self.find_end();
        }
        Ok(())
    }

    /// Where this reader's first byte is in the object: 0, or the first line start of its range.
    pub(crate) fn begin(&self) -> u64 {
        self.begin
    }

    /// Where the reader stops in the object: its size, or the end of its range once found.
    pub(crate) fn end(&self) -> u64 {
        self.limit
    }

    /// Whether the reader stops before the end of the object (a range that is not the last).
    /// Known once [`Self::eof`] is true.
    pub(crate) fn ends_inside(&self) -> bool {
        self.limit < self.size
    }

    /// The bytes read and not yet consumed.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Whether everything to read has been read (pending bytes may remain).
    pub(crate) fn eof(&self) -> bool {
        self.offset >= self.limit
    }

    /// Drops the first `n` pending bytes.
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
    }

    /// Bounds the unconsumed bytes: [`Self::fill`] fails instead of reading more once `max`
    /// are pending, so that one huge record (a 1 GB field) cannot take the memory.
    pub(crate) fn with_max_pending(mut self, max: usize) -> Self {
        self.max_pending = max;
        self
    }

    /// Appends the next block to the pending bytes; does nothing at the end. A leading UTF-8
    /// byte order mark of the object is dropped.
    ///
    /// # Errors
    /// External errors when the store fails; [`weir_api::Error::BadRecord`] naming the file and the byte
    /// offset of the pending bytes when more than the bound set by [`Self::with_max_pending`]
    /// are pending.
    pub(crate) async fn fill(&mut self) -> Result<()> {
        if self.eof() {
            return Ok(());
        }
        if self.pending().len() >= self.max_pending {
            let at = self.buf_at + self.start as u64;
            return Err(weir_api::Error::BadRecord {
                location: weir_api::RecordLocation {
                    input: self.input.clone(),
                    line: None,
                    column: None,
                },
                message: format!(
                    "from byte {at} on, {} bytes hold no end of a batch of records: a record is \
                     longer than the source's max_buffer_bytes ({}) allows",
                    self.pending().len(),
                    self.max_pending
                ),
            });
        }
        self.buf_at += self.start as u64;
        self.buf.drain(..self.start);
        self.start = 0;
        self.read_block().await?;
        self.find_end();
        Ok(())
    }

    /// Appends the next block of the object to `buf`.
    async fn read_block(&mut self) -> Result<()> {
        let end = self.limit.min(self.offset + self.block as u64);
        let range = self.offset..end;
        let bytes = self
            .store
            .get_range(&self.path, range.clone())
            .await
            .map_err(|e| store_error(format!("reading `{}` at {range:?}", self.input), e))?;
        let bytes = match bytes.strip_prefix(UTF8_BOM) {
            Some(rest) if self.offset == 0 => {
                self.buf_at += UTF8_BOM.len() as u64;
                rest
            }
            _ => &bytes[..],
        };
        self.offset = end;
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Once the bytes from the range's nominal end minus one have arrived, ends the reader
    /// after the first line feed among them.
    fn find_end(&mut self) {
        let Some(end) = self.seek_end else { return };
        let read_to = self.buf_at + self.buf.len() as u64;
        if read_to < end {
            return;
        }
        let from = usize::try_from((end - 1).saturating_sub(self.buf_at)).unwrap_or(usize::MAX);
        let from = from.max(self.start).min(self.buf.len());
        if let Some(at) = memchr::memchr(b'\n', &self.buf[from..]) {
            let stop = self.buf_at + (from + at) as u64 + 1;
            self.seek_end = None;
            self.truncate_at(stop);
        }
    }

    /// Ends reading at object position `at`, dropping what was read past it.
    fn truncate_at(&mut self, at: u64) {
        let keep = usize::try_from(at.saturating_sub(self.buf_at)).unwrap_or(usize::MAX);
        self.buf.truncate(keep.max(self.start));
        self.offset = at;
        self.limit = at;
    }

    /// The number of line feeds before [`Self::begin`]: what turns line numbers counted from
    /// the range's start into the file's line numbers. The first call in a range past the
    /// start reads the object up to there, so only error reporting calls it.
    ///
    /// # Errors
    /// External errors when the store fails.
    pub(crate) async fn lines_before_begin(&mut self) -> Result<u64> {
        if let Some(lines) = self.lines_before {
            return Ok(lines);
        }
        let mut lines = 0u64;
        let mut at = 0u64;
        while at < self.begin {
            let end = self.begin.min(at + self.block as u64);
            let bytes = self
                .store
                .get_range(&self.path, at..end)
                .await
                .map_err(|e| store_error(format!("reading `{}` at {at}..{end}", self.input), e))?;
            lines += memchr::memchr_iter(b'\n', &bytes).count() as u64;
            at = end;
        }
        self.lines_before = Some(lines);
        Ok(lines)
    }
}
