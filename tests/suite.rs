//! The test suite: every `.remora` file under `tests/` (and the programs in
//! `examples/`), each case a test, run by `remora::testing` (the same
//! harness as `remora test`). Every case with a `parse-error:` or
//! `type-error:` check also has its rendered diagnostics snapshot-tested
//! (tests/snapshots), and so has every `dump:` its compiler level; every
//! case with runs must also lower to the compiler's explicit maps.

use libtest_mimic::{Arguments, Failed, Trial};
use remora::testing::{collect, run_case};
use remora_syntax::testblock::parse_cases;
use std::path::{Path, PathBuf};

fn main() {
    // Every run case also runs without batched application, elaborated
    // and lowered by the compiler, and must agree.
    remora::testing::COMPARE_WITH_REFERENCE.store(true, std::sync::atomic::Ordering::Relaxed);
    let args = Arguments::from_args();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["tests", "examples"] {
        collect(&root.join(dir), &mut files);
    }
    files.sort();
    // The examples of the prelude reference, as a case file of their own.
    let docs = root.join("docs/prelude.md");
    if docs.exists() {
        files.push(docs);
    }
    let mut trials = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) => {
                trials.push(Trial::test(rel.clone(), move || {
                    Err(format!("cannot read: {e}").into())
                }));
                continue;
            }
        };
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = if file.extension().is_some_and(|e| e == "md") {
            match remora::testing::markdown_cases(&text) {
                Ok(cases) => cases,
                Err(e) => {
                    trials.push(Trial::test(rel.clone(), move || Err(e.into())));
                    continue;
                }
            }
        } else {
            text
        };
        match parse_cases(&text, &stem) {
            Err(e) => trials.push(Trial::test(rel.clone(), move || Err(e.into()))),
            Ok(cases) => {
                for case in cases {
                    let name = format!("{rel}::{}", case.name);
                    let file = file.clone();
                    let rel = rel.clone();
                    trials.push(Trial::test(name.clone(), move || {
                        let result = remora_syntax::stack::run_deep(move || run_case(&rel, &file, &case));
                        match result {
                            Err(message) => Err(message.into()),
                            Ok(r) => match r.snapshot {
                                Some(rendered) => snapshot(&name, rendered),
                                None => Ok(()),
                            },
                        }
                    }));
                }
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

/// The rendered diagnostics of a case that expects errors, as an insta
/// snapshot in tests/snapshots.
fn snapshot(case: &str, rendered: String) -> Result<(), Failed> {
    let name = case.replace(['/', ':', '.'], "_");
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        settings.bind(|| insta::assert_snapshot!(name, rendered));
    }));
    if outcome.is_err() {
        return Err("snapshot differs (cargo insta review)".into());
    }
    Ok(())
}
