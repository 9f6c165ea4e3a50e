//! The per-cell diagnostic (`remora run -v`): every application that ran
//! cell by cell instead of array-at-a-time, where it is, why, and over how
//! many cells, so that a slow program explains itself.
//!
//! Batching records why it gave up (`note_cell_by_cell`: the innermost
//! reason is kept); the loops that then run one cell at a time
//! (`log_cells`) take that reason with them into the log.

use crate::eval::Interpreter;
use remora_syntax::Span;

/// One place that ran cell by cell.
#[derive(Clone, Debug)]
pub struct CellByCell {
    /// The application.
    pub span: Span,
    /// Why it could not run batched.
    pub reason: String,
    /// How many times it ran cell by cell.
    pub times: usize,
    /// How many cells, over all those times.
    pub cells: usize,
}

impl Interpreter {
    /// Starts logging what runs cell by cell.
    pub fn log_cell_by_cell(&mut self) {
        self.cell_log = Some(Vec::new());
    }

    /// What ran cell by cell so far, in the order first met.
    pub fn cell_by_cell(&self) -> &[CellByCell] {
        self.cell_log.as_deref().unwrap_or_default()
    }

    /// Batching gives up for `reason` (kept if no inner reason was given
    /// first). Costs nothing unless the log is on.
    pub(crate) fn note_cell_by_cell(&mut self, reason: impl FnOnce() -> String) {
        if self.cell_log.is_some() && self.gave_up.is_none() {
            self.gave_up = Some(reason());
        }
    }

    /// `cells` cells of the application at `span` run one at a time.
    pub(crate) fn log_cells(&mut self, span: Span, cells: usize) {
        let reason = self.gave_up.take();
        let Some(log) = &mut self.cell_log else {
            return;
        };
        if cells < 2 {
            return;
        }
        let reason = reason.unwrap_or_else(|| "batching gave up (an error or an effect in some cell)".into());
        match log
            .iter_mut()
            .find(|c| c.span.same_place(&span) && c.reason == reason)
        {
            Some(c) => {
                c.times += 1;
                c.cells = c.cells.saturating_add(cells);
            }
            None => log.push(CellByCell {
                span,
                reason,
                times: 1,
                cells,
            }),
        }
    }
}
