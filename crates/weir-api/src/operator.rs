//! The operator plugin surface: what a Rust developer implements to add an operator to Weir.

use crate::context::TaskContext;
use crate::error::Result;
use crate::ids::OperatorId;
use crate::message::{Barrier, Piece, Watermark, WatermarkMarks};
use crate::state_image::StateImage;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use std::sync::Arc;

/// One thing an operator emitted, in emission order.
#[derive(Debug, Clone)]
pub enum Emitted {
    /// A batch on the main output (`port == 0`) or on side output `port` (1-based, in the order of
    /// [`PreparedOperator::side_outputs`]).
    Data {
        /// 0 for the main output, `1 + i` for the `i`-th side output.
        port: usize,
        /// The rows.
        batch: RecordBatch,
    },
    /// A batch on the main output inside which the operator's output watermark advances
    /// ([`Output::emit_marked`]).
    MarkedData {
        /// The rows.
        batch: RecordBatch,
        /// Where the watermark advances, never empty.
        marks: WatermarkMarks,
    },
    /// The operator's output watermark advanced.
    Watermark(Watermark),
    /// The batches emitted after this, until the next such item, carry rows read behind this
    /// split watermark ([`crate::StreamMessage::SplitWatermark`]).
    SplitWatermark(Watermark),
}

/// Collects what an operator emits while it handles one input; the runtime drains it afterwards.
///
/// Emission order is kept: a batch emitted before a watermark reaches downstream before it.
#[derive(Debug, Default)]
pub struct Output {
    emitted: Vec<Emitted>,
}

impl Output {
    /// An empty output buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Emits a batch on the main output; empty batches are skipped.
    pub fn emit(&mut self, batch: RecordBatch) {
        self.emit_to(0, batch);
    }

    /// Emits a batch on side output `index` (0-based, as declared by
    /// [`PreparedOperator::side_outputs`]); empty batches are skipped.
    pub fn emit_side(&mut self, index: usize, batch: RecordBatch) {
        self.emit_to(index + 1, batch);
    }

    fn emit_to(&mut self, port: usize, batch: RecordBatch) {
        if batch.num_rows() > 0 {
            self.emitted.push(Emitted::Data { port, batch });
        }
    }

    /// Emits the operator's output watermark.
    pub fn emit_watermark(&mut self, watermark: Watermark) {
        self.emitted.push(Emitted::Watermark(watermark));
    }

    /// Emits a batch on the main output with the watermark advancing inside it at `marks`: the
    /// same as emitting its rows and watermarks one piece at a time, in one message. An empty
    /// batch emits only its last watermark. Side outputs receive the last watermark after the
    /// batch, so an operator that emits side-output rows while handling a batch with marks
    /// emits its main output piece by piece instead (as [`Operator::process_marked_batch`]'s
    /// default does).
    pub fn emit_marked(&mut self, batch: RecordBatch, marks: WatermarkMarks) {
        if batch.num_rows() == 0 {
            if let Some(w) = marks.last() {
                self.emit_watermark(w);
            }
        } else if marks.is_empty() {
            self.emit(batch);
        } else {
            self.emitted.push(Emitted::MarkedData { batch, marks });
        }
    }

    /// Declares that the batches emitted from now on carry rows read behind split watermark
    /// `watermark` ([`crate::StreamMessage::SplitWatermark`]); what an operator that passes rows
    /// through forwards from [`Operator::process_split_watermark`].
    pub fn emit_split_watermark(&mut self, watermark: Watermark) {
        self.emitted.push(Emitted::SplitWatermark(watermark));
    }

    /// Whether nothing was emitted since the last drain.
    pub fn is_empty(&self) -> bool {
        self.emitted.is_empty()
    }

    /// Takes everything emitted so far, in order.
    pub fn drain(&mut self) -> std::vec::Drain<'_, Emitted> {
        self.emitted.drain(..)
    }
}

/// A running instance of an operator: one per subtask, driven by one task.
///
/// The runtime contract:
/// - Calls on one instance are never concurrent; the instance MUST NOT block on I/O (it runs on
///   the task's thread and would stall every operator chained with it).
/// - `process_batch` MUST emit only batches with the schema its [`PreparedOperator`] declared
///   for that port; the runtime checks every port (once per distinct `SchemaRef`, so it costs a
///   pointer comparison per batch), and a mismatch fails the job with an internal error.
/// - Watermarks arrive non-decreasing; an operator MUST NOT emit a watermark lower than one it
///   emitted before. The default `process_watermark` forwards the input watermark unchanged, which
///   is right for every operator that does not hold rows back.
/// - On a barrier, an operator MUST emit (flush) everything that belongs before it, then return;
///   the runtime forwards the barrier after the call.
/// - Dropping the instance MUST free everything it holds.
pub trait Operator: Send {
    /// Handles one batch from input `input` (0 for single-input operators).
    ///
    /// # Errors
    /// Any error fails the task and with it the job; classify it with [`crate::Error`]'s variants.
    fn process_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Output) -> Result<()>;

    /// Handles a batch from input `input` inside which the input watermark advances at
    /// `marks` ([`WatermarkMarks`]). The default cuts the batch at its marks and calls
    /// [`Operator::process_batch`] and [`Operator::process_watermark`] for each piece in turn,
    /// which is always right. An operator overrides it to handle the batch whole (a filter
    /// keeps the marks of the rows it keeps; a window judges each row against the watermark
    /// before it), and must then give the same result as the default.
    ///
    /// # Errors
    /// As [`Operator::process_batch`].
    fn process_marked_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        marks: &WatermarkMarks,
        out: &mut Output,
    ) -> Result<()> {
        process_in_pieces(self, input, batch, marks, out)
    }

    /// Handles an advance of the operator's input watermark (the minimum over its inputs).
    ///
    /// # Errors
    /// As [`Operator::process_batch`].
    fn process_watermark(&mut self, watermark: Watermark, out: &mut Output) -> Result<()> {
        out.emit_watermark(watermark);
        Ok(())
    }

    /// Whether the operator is told the watermark of each of its inputs on its own
    /// ([`Operator::process_input_watermark`]). An operator with several inputs that decides
    /// lateness answers `true` (a join): judged against its own input's watermark, whether a
    /// row is late does not depend on how far the other inputs have got. The default is
    /// `false`.
    fn reads_input_watermarks(&self) -> bool {
        false
    }

    /// The watermark of input `input` alone (the minimum over that input's channels) advanced
    /// to `watermark`. Called only for an operator whose
    /// [`Operator::reads_input_watermarks`] is `true`, at its place among the input's rows
    /// (a batch inside which it advances is handed over in pieces), and before the
    /// [`Operator::process_watermark`] the same advance may cause. The default does nothing.
    ///
    /// # Errors
    /// As [`Operator::process_batch`].
    fn process_input_watermark(
        &mut self,
        _input: usize,
        _watermark: Watermark,
        _out: &mut Output,
    ) -> Result<()> {
        Ok(())
    }

    /// The rows of the batches that follow on input `input`, until the next call, were read
    /// from their split when its own watermark stood at `watermark` ([`Watermark::NONE`]: no
    /// bound). Sources with `lateness: split` send it (docs/event-time.md). An operator that
    /// decides lateness (a window) treats a row as late when it is behind this or behind its
    /// input watermark, so that which rows are late does not depend on how fast the other
    /// splits were read. The default forwards it, which is right for an operator whose output
    /// rows are its input rows (filters, projections); an operator whose output rows are new
    /// (aggregates) must not forward it.
    ///
    /// # Errors
    /// As [`Operator::process_batch`].
    fn process_split_watermark(
        &mut self,
        _input: usize,
        watermark: Watermark,
        out: &mut Output,
    ) -> Result<()> {
        out.emit_split_watermark(watermark);
        Ok(())
    }

    /// Called when every input delivered barrier `barrier`, before it is forwarded.
    ///
    /// # Errors
    /// As [`Operator::process_batch`].
    fn on_barrier(&mut self, _barrier: Barrier, _out: &mut Output) -> Result<()> {
        Ok(())
    }

    /// Called after [`Operator::on_barrier`] in a job that checkpoints: an operator that keeps
    /// its state in memory (not in [`TaskContext::keyed_state`]) returns its state as of the
    /// barrier; the runtime encodes and writes it in the background, and hands its rows back
    /// through [`TaskContext::restored_image`] on a restore. `None` (the default): the operator
    /// keeps no state of its own.
    ///
    /// # Errors
    /// As [`Operator::process_batch`].
    fn snapshot_image(&mut self, _barrier: Barrier) -> Result<Option<StateImage>> {
        Ok(None)
    }

    /// Called once when every input has ended; emit what is still held.
    ///
    /// # Errors
    /// As [`Operator::process_batch`].
    fn on_end_of_input(&mut self, _out: &mut Output) -> Result<()> {
        Ok(())
    }
}

/// [`Operator::process_marked_batch`]'s default, for an operator that handles some batches with
/// marks whole and the others piece by piece: the batch cut at its marks, each run of rows
/// handed to [`Operator::process_batch`], each advance to [`Operator::process_watermark`] and
/// each split watermark mark to [`Operator::process_split_watermark`].
///
/// # Errors
/// The first error of those calls.
pub fn process_in_pieces<O: Operator + ?Sized>(
    op: &mut O,
    input: usize,
    batch: RecordBatch,
    marks: &WatermarkMarks,
    out: &mut Output,
) -> Result<()> {
    for piece in marks.pieces(&batch) {
        match piece {
            Piece::Rows(rows) => op.process_batch(input, rows, out)?,
            Piece::Watermark(w) => op.process_watermark(w, out)?,
            Piece::SplitWatermark(w) => op.process_split_watermark(input, w, out)?,
        }
    }
    Ok(())
}

/// A named extra output of an operator (dead letters, late rows).
#[derive(Debug, Clone)]
pub struct SideOutput {
    /// Name used in job specs as `node.name`.
    pub name: String,
    /// Schema of its batches.
    pub schema: SchemaRef,
}

/// What an [`OperatorFactory`] is given to prepare one operator of a job.
#[derive(Debug, Clone, Copy)]
pub struct OperatorArgs<'a> {
    /// The operator's stable id.
    pub operator_id: &'a OperatorId,
    /// The node's `options` object from the job spec (`null` when absent).
    pub options: &'a serde_json::Value,
    /// JSON path of `options` in the spec, for error messages (`operators[2].options`).
    pub options_path: &'a str,
    /// Schemas of the operator's inputs, in input order.
    pub input_schemas: &'a [SchemaRef],
}

/// A validated, schema-resolved operator, shared by all its subtasks.
///
/// Preparing does no I/O and starts nothing: `weir validate` prepares every operator of a job.
pub trait PreparedOperator: Send + Sync + std::fmt::Debug {
    /// Schema of the main output.
    fn output_schema(&self) -> SchemaRef;

    /// Extra named outputs, in port order.
    fn side_outputs(&self) -> Vec<SideOutput> {
        Vec::new()
    }

    /// One line for `EXPLAIN` and plan output, e.g. `filter: price > 1000`.
    fn describe(&self) -> String;

    /// The input columns the operator keys its state by, if it keeps keyed state per key of
    /// its rows (e.g. a window's `key_by`). Validation then requires, at parallelism > 1, that
    /// the operator's input is hash-partitioned on exactly these columns in this order (so a
    /// key's state shard is the shard the exchange routed it by), and refuses an empty list
    /// (one global key) at parallelism > 1. `None` (the default): no such requirement.
    fn key_columns(&self) -> Option<Vec<String>> {
        None
    }

    /// Per input, the columns it must be hash-partitioned on, for an operator with several
    /// inputs that keys its state by columns named differently on each (a join). The default
    /// is [`PreparedOperator::key_columns`] for every input.
    fn input_key_columns(&self) -> Option<Vec<Vec<String>>> {
        self.key_columns().map(|keys| vec![keys])
    }

    /// Whether the operator handles an updating input ([`crate::changelog`]): rows that carry
    /// a row kind, some of which retract earlier rows. Validation refuses to connect an
    /// updating stream to an operator that answers `false` (the default), since it would take
    /// retractions for new rows.
    fn accepts_changes(&self) -> bool {
        false
    }

    /// Whether the operator's output can depend on event time: on the watermarks it is sent,
    /// or on which rows are late. A source with a watermark whose rows reach only operators
    /// that answer `false` (filters, projections, unions) is read side by side like a source
    /// without one, since the order its rows arrive in changes nothing. The default, `true`,
    /// is the safe answer for any operator that overrides
    /// [`Operator::process_watermark`] or [`Operator::process_split_watermark`].
    fn reads_event_time(&self) -> bool {
        true
    }

    /// The top-level options that change how the operator runs (memory, batching), not what
    /// its state means. A restore into a changed version of the job ignores them when it
    /// compares the operator's options with the checkpoint's, so tuning them keeps the state.
    /// The default: none.
    fn tuning_options(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// Creates the instance for one subtask.
    ///
    /// # Errors
    /// When the instance cannot be created (resources the operator needs).
    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>>;
}

/// Creates operators of one type from their options; registered under a name (`filter`,
/// `project`, or a plugin's own name) so that job specs can use it.
pub trait OperatorFactory: Send + Sync {
    /// Validates the options against the input schemas and prepares the operator.
    ///
    /// # Errors
    /// [`crate::Error::Config`] or [`crate::Error::Expression`] naming the offending option's path.
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>>;
}
