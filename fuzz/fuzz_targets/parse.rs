//! Reader + parser + printer + checker + interpreter on arbitrary text: no
//! input may panic or hang, whatever parses cleanly must print and read back
//! to the same tree, the checker runs on whatever parses, and the
//! interpreter (with a step and memory budget) on whatever checks, twice:
//! batched application must give what the reference path gives; and the
//! compiler lowers whatever checks through its levels (explicit maps,
//! monomorphic, fused), which verify and, raised back and run, print the
//! same.
//!
//! Inputs run on one long-lived worker thread with the pipeline's deep stack
//! (as `remora` runs them), fed through a channel: a thread per input would
//! cost more than the parse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use remora_syntax::{Dialect, FileLoader, SourceMap, print, render_all};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[path = "worker.rs"]
mod worker;
use worker::Worker;

/// Imports see an empty file system.
struct NoFiles;

impl FileLoader for NoFiles {
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        Ok(Path::new("/fuzz").join(path))
    }
    fn read_to_string(&self, _: &Path) -> std::io::Result<String> {
        Err(std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

fn check(text: &str) {
    let mut sources = SourceMap::new();
    let program = remora_syntax::load_program_text(&mut sources, &NoFiles, "<fuzz>", None, text);
    let _ = render_all(&program.diagnostics, &sources);
    if !program.has_errors() {
        let printed = print::program(&program.value);
        let mut diags = Vec::new();
        let file = sources.add(remora_syntax::SourceFile::new("<printed>", None, printed.clone()));
        let items = remora_syntax::reader::read(&printed, file, &mut diags);
        let reread = remora_syntax::parser::Parser::new(&mut diags, Dialect::Tree).file(&items);
        assert!(diags.is_empty(), "printed tree does not read back: {printed}");
        assert!(
            reread.decls == program.value.decls,
            "round trip changed the tree: {printed}"
        );
        let checked = remora_check::check_program(&program.value);
        let _ = render_all(&checked.diagnostics, &sources);
        for d in &checked.value {
            if let remora_check::typed::TDecl::Def { value, .. } = d {
                let _ = checked.show(&value.ty);
            }
        }
        // Whatever checks lowers through the compiler's levels, which
        // verify (a construct not handled yet is no bug; a broken level
        // is), and raised back and run prints what the program prints.
        let lowered = if checked.has_errors() {
            None
        } else {
            match remora_compile::lowered(&checked.value, remora_compile::Level::Fused, &checked.names) {
                Ok(p) => Some(p),
                Err(u) => {
                    assert!(!u.what.starts_with("internal error"), "{}: {text}", u.what);
                    None
                }
            }
        };
        // Programs that touch files are not run.
        if !checked.has_errors() && !text.contains("-file") {
            let run = |reference_only: bool| {
                let mut interp = budgeted(reference_only);
                interp.program(&checked.value).map(|(_, values)| {
                    values
                        .iter()
                        .map(remora_value::print::to_string)
                        .collect::<Vec<_>>()
                })
            };
            let batched = run(false);
            if let (Some(p), Ok(values)) = (&lowered, &batched) {
                let raised = remora_compile::raise_program(p);
                assert!(raised.is_ok(), "cannot raise: {raised:?}: {text}");
                if let Ok(decls) = raised {
                    let again = budgeted(false).program(&decls).map(|(_, values)| {
                        values
                            .iter()
                            .map(remora_value::print::to_string)
                            .collect::<Vec<_>>()
                    });
                    // (A budget spent differently is no disagreement.)
                    if let Ok(again) = again {
                        assert!(
                            &again == values,
                            "lowered and raised: {again:?} against {values:?}: {text}"
                        );
                    }
                }
            }
            agree(batched, run(true), text);
        }
    }
    let expr = remora_syntax::parse_expression(&mut sources, "<cli>", text, Dialect::Source);
    let _ = render_all(&expr.diagnostics, &sources);
    if !expr.has_errors() {
        let _ = print::expr_to_string(&expr.value);
        let checked = remora_check::check_expression(&expr.value);
        let _ = render_all(&checked.diagnostics, &sources);
        if let (Some(t), false) = (&checked.value, checked.has_errors() || text.contains("-file")) {
            let run = |reference_only: bool| {
                budgeted(reference_only)
                    .eval(t, &Default::default())
                    .map(|v| vec![remora_value::print::to_string(&v)])
            };
            agree(run(false), run(true), text);
        }
    }
}

/// An interpreter with a step budget; arrays are limited to 2^16 atoms.
/// `reference_only` turns batched application off.
fn budgeted(reference_only: bool) -> remora_interp::Interpreter {
    remora_interp::Interpreter::limit_atoms(1 << 16);
    let mut interp = remora_interp::Interpreter::default();
    interp.trace = Some(Vec::new());
    interp.fuel = Some(20_000);
    interp.reference_only = reference_only;
    interp
}

/// Batched evaluation must print what the reference path prints, or fail
/// with the same message, unless a budget ran out (batching spends the
/// budget differently).
fn agree(
    batched: Result<Vec<String>, remora_interp::RunError>,
    reference: Result<Vec<String>, remora_interp::RunError>,
    text: &str,
) {
    let budget = |r: &Result<Vec<String>, remora_interp::RunError>| {
        r.as_ref()
            .is_err_and(|e| e.message.contains("budget") || e.message.contains("too large"))
    };
    if budget(&batched) || budget(&reference) {
        return;
    }
    let msg = |r: Result<Vec<String>, remora_interp::RunError>| r.map_err(|e| e.message);
    let (b, r) = (msg(batched), msg(reference));
    assert!(b == r, "batched {b:?} but reference {r:?} for {text}");
}

static WORKER: OnceLock<Worker<String>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    Worker::get(&WORKER, |text: String| check(&text)).run(text.to_string(), "worker finished the input");
});
