//! Decoding the parts of one stream ahead: while a source subtask hands on the rows of one part
//! in order, the parts after it are opened and read to their end on tasks of their own (on the
//! runtime's worker threads), their batches queued, so that decoding uses every core while the
//! rows still meet one watermark in stream order.

use std::collections::VecDeque;
use std::sync::Arc;
use weir_api::{PreparedSource, SourceSplit, SplitBatch, SplitReader, TaskContext};

/// Batches a decoder may queue ahead of the task: enough for a whole split of the default
/// size (16 MiB of text is about 15 batches of 8192 bids), so that decoders rarely wait.
const DECODED_AHEAD: usize = 32;

/// The readers of a subtask's splits, in order, with up to `width` of them decoding at once.
pub(super) struct ReadAhead {
    /// Started splits, by index in the order, oldest first.
    started: VecDeque<(usize, Box<dyn SplitReader>)>,
    /// The next split index to start.
    next: usize,
    /// Splits decoded at once (1: none ahead; the task reads each split itself).
    width: usize,
}

impl ReadAhead {
    /// Readers with `width` splits decoding at once (at least 1).
    pub(super) fn new(width: usize) -> Self {
        ReadAhead {
            started: VecDeque::new(),
            next: 0,
            width: width.max(1),
        }
    }

    /// The reader of `order[index]`, the next split in order, with the splits after it started
    /// so that `width` decode at once.
    ///
    /// # Errors
    /// The source's error opening the split (width 1); an internal error when the splits are
    /// not asked for in order.
    pub(super) async fn reader(
        &mut self,
        source: &Arc<dyn PreparedSource>,
        ctx: &TaskContext,
        order: &[SourceSplit],
        index: usize,
    ) -> weir_api::Result<Box<dyn SplitReader>> {
        if self.width <= 1 {
            return source.open_split(&order[index], ctx).await;
        }
        self.next = self.next.max(index);
        while self.next < order.len() && self.next < index + self.width {
            let reader = spawn(source, ctx, &order[self.next]);
            self.started.push_back((self.next, reader));
            self.next += 1;
        }
        match self.started.pop_front() {
            Some((i, reader)) if i == index => Ok(reader),
            _ => Err(weir_api::Error::Internal(format!(
                "split {index} of a stream was asked for out of order"
            ))),
        }
    }
}

/// Opens `split` and reads it to its end on a task of its own, queueing its batches (and its
/// error, which ends it).
fn spawn(
    source: &Arc<dyn PreparedSource>,
    ctx: &TaskContext,
    split: &SourceSplit,
) -> Box<dyn SplitReader> {
    let (tx, rx) = tokio::sync::mpsc::channel(DECODED_AHEAD);
    let source = Arc::clone(source);
    let ctx = ctx.clone();
    let split = split.clone();
    let handle = tokio::spawn(async move {
        let mut reader = match source.open_split(&split, &ctx).await {
            Ok(reader) => reader,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        loop {
            let read = reader.next_batch().await;
            let end = !matches!(read, Ok(Some(_)));
            if let Some(read) = read.transpose()
                && tx.send(read).await.is_err()
            {
                return;
            }
            if end {
                return;
            }
        }
    });
    Box::new(DecodedSplit {
        batches: rx,
        decoder: handle.abort_handle(),
    })
}

/// The batches a decoder read from one split, in order; aborts the decoder when dropped (a
/// job that ends or fails leaves no decoder running).
struct DecodedSplit {
    batches: tokio::sync::mpsc::Receiver<weir_api::Result<SplitBatch>>,
    decoder: tokio::task::AbortHandle,
}

impl Drop for DecodedSplit {
    fn drop(&mut self) {
        self.decoder.abort();
    }
}

#[async_trait::async_trait]
impl SplitReader for DecodedSplit {
    async fn next_batch(&mut self) -> weir_api::Result<Option<SplitBatch>> {
        self.batches.recv().await.transpose()
    }
}
